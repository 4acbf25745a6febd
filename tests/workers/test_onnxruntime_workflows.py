"""ONNX Runtime TensorRT / CUDA EP workflows against onnxruntime patched to report GPU providers while running the
real CPU session underneath, so the provider options are checked and the outputs still compared with eager."""

import sys

import onnxruntime
import pytest

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job


@pytest.fixture
def fake_ort(monkeypatch):
    def install(available):
        created = []
        real_session = onnxruntime.InferenceSession

        class Session:
            def __init__(self, path, providers):
                created.append({"path": path, "providers": providers})
                self._real = real_session(path, providers=["CPUExecutionProvider"])
                self._providers = [p if isinstance(p, str) else p[0] for p in providers]

            def get_providers(self):
                return self._providers

            def __getattr__(self, name):
                return getattr(self._real, name)

        monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: list(available))
        monkeypatch.setattr(onnxruntime, "InferenceSession", Session)
        return created

    return install


def _job(workflow, precision="fp16", model="ffn-small", **options):
    return JobSpec(model=model, workflow=workflow, precision=precision, batch_size=2, input_len=8, device="cpu",
                   warmup=0, repeats=1, options=options)


ALL_EPS = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_tensorrt_ep_options_profiles_and_engine_cache(fake_ort, tmp_path, precision):
    created = fake_ort(ALL_EPS)
    result = run_job(_job("onnxruntime_trt", precision=precision), tmp_path)
    assert result.status == "ok", result.reason
    (session,) = created
    names = [p if isinstance(p, str) else p[0] for p in session["providers"]]
    assert names == ALL_EPS  # TensorRT first, CUDA and CPU as fallbacks
    trt = session["providers"][0][1]
    assert trt["trt_fp16_enable"] is (precision == "fp16")
    assert trt["trt_engine_cache_enable"] is True
    assert trt["trt_engine_cache_path"] == str(tmp_path / "onnxruntime_trt" / "trt_engines")
    assert trt["trt_max_workspace_size"] > 0
    assert trt["trt_profile_min_shapes"] == "input_0:1x1x256"
    assert trt["trt_profile_opt_shapes"] == trt["trt_profile_max_shapes"] == "input_0:2x8x256"
    assert session["path"].startswith(str(tmp_path / "onnxruntime_trt"))
    settings = result.metrics.settings
    assert settings["execution_providers"] == ",".join(ALL_EPS)
    assert settings["onnx_export"] == "dynamo (dynamic batch, sequence)"
    assert settings["trt_engine_cache_path"] == trt["trt_engine_cache_path"]
    assert result.metrics.accumulation == ("fp16" if precision == "fp16" else "fp32")
    assert result.correctness.passed


def test_cuda_ep_with_cpu_fallback(fake_ort, tmp_path):
    created = fake_ort(["CUDAExecutionProvider", "CPUExecutionProvider"])
    result = run_job(_job("onnxruntime_cuda", io_binding=False), tmp_path)
    assert result.status == "ok", result.reason
    (session,) = created
    assert session["providers"][0][0] == "CUDAExecutionProvider"
    assert session["providers"][1:] == ["CPUExecutionProvider"]
    assert result.metrics.settings["io_binding"] is False
    assert result.metrics.accumulation == "fp32"
    assert result.correctness.passed


@pytest.mark.parametrize("workflow,missing", [("onnxruntime_trt", "TensorrtExecutionProvider"),
                                              ("onnxruntime_cuda", "CUDAExecutionProvider")])
def test_missing_execution_provider_is_unsupported(fake_ort, tmp_path, workflow, missing):
    created = fake_ort(["CPUExecutionProvider"])
    result = run_job(_job(workflow), tmp_path)
    assert result.status == "unsupported"
    assert missing in result.reason
    assert created == []


def test_missing_onnxruntime_is_unsupported(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    result = run_job(_job("onnxruntime_trt"), tmp_path)
    assert result.status == "unsupported"
    assert "onnxruntime not importable" in result.reason


@pytest.mark.parametrize("workflow", ["onnxruntime_trt", "onnxruntime_cuda"])
def test_llms_are_refused_with_reason(fake_ort, tmp_path, workflow):
    fake_ort(ALL_EPS)
    result = run_job(_job(workflow, model="llama-2layer", precision="fp32"), tmp_path)
    assert result.status == "unsupported"
    assert "KV-cache" in result.reason
