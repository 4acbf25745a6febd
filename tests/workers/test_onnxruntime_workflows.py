"""ONNX Runtime TensorRT / CUDA EP workflows against onnxruntime patched to report GPU providers while running the
real CPU session underneath, so the provider options are checked and the outputs still compared with eager; bf16
buffers bound through the real CPU EP; LLMs exported with their KV cache and decoded on the real CPU EP."""

import sys
from pathlib import Path

import onnx
import onnxruntime
import pytest
import torch
from onnx import TensorProto, helper

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job
from mlcbench.workers.stacks.onnx_export import runner


@pytest.fixture
def fake_ort(monkeypatch):
    def install(available, unloadable=()):
        created = []
        real_session = onnxruntime.InferenceSession

        class Session:
            def __init__(self, path, providers):
                created.append({"path": path, "providers": providers})
                self._real = real_session(path, providers=["CPUExecutionProvider"])
                names = [p if isinstance(p, str) else p[0] for p in providers]
                self._providers = [name for name in names if name not in unloadable]

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
    assert session["path"].startswith(str(tmp_path / "onnx"))  # exports are shared by the onnxruntime* workflows
    settings = result.metrics.settings
    applied = result.metrics.applied
    assert applied.execution_providers == tuple(ALL_EPS)
    assert applied.export == "onnx" and applied.dynamic_shapes is True
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
    assert result.metrics.applied.io_binding is False
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


def test_tensorrt_ep_listed_but_not_created_is_unsupported_with_the_reason(fake_ort, tmp_path):
    # ORT lists the TensorRT EP of a GPU build even where TensorRT's libraries are missing, then falls back silently
    fake_ort(ALL_EPS, unloadable={"TensorrtExecutionProvider"})
    result = run_job(_job("onnxruntime_trt"), tmp_path)
    assert result.status == "unsupported"
    assert "lists TensorrtExecutionProvider but could not create it" in result.reason
    assert "CUDAExecutionProvider" in result.reason  # what the session fell back to


def test_tensorrt_ep_whose_library_does_not_load_is_unsupported_before_any_export(fake_ort, tmp_path, monkeypatch):
    created = fake_ort(ALL_EPS)
    build = tmp_path / "ort"
    (build / "capi").mkdir(parents=True)
    for library in ("libonnxruntime_providers_shared.so", "libonnxruntime_providers_tensorrt.so"):
        (build / "capi" / library).write_bytes(b"not a shared object")
    monkeypatch.setattr(onnxruntime, "__file__", str(build / "__init__.py"))
    result = run_job(_job("onnxruntime_trt"), tmp_path / "cache")
    assert result.status == "unsupported"
    assert "lists TensorrtExecutionProvider but cannot load it: " in result.reason
    assert "libonnxruntime_providers" in result.reason  # the dynamic loader's own words
    assert created == [] and not (tmp_path / "cache" / "onnx").exists()


def test_llms_are_refused_by_the_tensorrt_ep_with_reason(fake_ort, tmp_path):
    fake_ort(ALL_EPS)
    result = run_job(_job("onnxruntime_trt", model="llama-2layer", precision="fp32"), tmp_path)
    assert result.status == "unsupported"
    assert "KV cache" in result.reason and "onnxruntime_cuda" in result.reason


def test_dynamic_export_is_made_once_for_every_batch_and_io_binding(fake_ort, tmp_path):
    fake_ort(["CUDAExecutionProvider", "CPUExecutionProvider"])
    first = run_job(_job("onnxruntime_cuda"), tmp_path)
    again = run_job(_job("onnxruntime_cuda", io_binding=False).model_copy(update={"batch_size": 3}), tmp_path)
    assert first.status == again.status == "ok", (first.reason, again.reason)
    assert first.metrics.settings["onnx_export_cached"] is False and first.metrics.settings["onnx_export_s"] > 0
    assert again.metrics.settings["onnx_export_cached"] is True and "onnx_export_s" not in again.metrics.settings
    assert again.correctness.passed and again.metrics.applied.io_binding is False
    assert len(list((tmp_path / "onnx").iterdir())) == 1


def _doubling_graph(path: Path) -> None:
    """bf16 in, bf16 out, the arithmetic in fp32: the CPU EP has bf16 Cast kernels but no bf16 MatMul."""
    nodes = [helper.make_node("Cast", ["input_0"], ["wide"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["wide", "wide"], ["doubled"]),
             helper.make_node("Cast", ["doubled"], ["output"], to=TensorProto.BFLOAT16)]
    graph = helper.make_graph(nodes, "double", [helper.make_tensor_value_info("input_0", TensorProto.BFLOAT16, ["b", 3])],
                              [helper.make_tensor_value_info("output", TensorProto.BFLOAT16, ["b", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@pytest.mark.parametrize("io_binding", [True, False])
def test_bf16_buffers_are_bound_by_their_onnx_element_type(tmp_path, io_binding):
    _doubling_graph(tmp_path / "double.onnx")
    sess = onnxruntime.InferenceSession(str(tmp_path / "double.onnx"), providers=["CPUExecutionProvider"])
    x = torch.randn(4, 3, dtype=torch.bfloat16)
    run, bound = runner(sess, (x,), torch.empty(4, 3, dtype=torch.bfloat16), io_binding)
    out = run(x)
    assert out.dtype == torch.bfloat16 and torch.equal(out, x * 2)  # doubling is exact in bf16
    y = torch.randn(4, 3, dtype=torch.bfloat16)
    assert torch.equal(run(y), (y if not io_binding else x) * 2)  # bound buffers are read in place
    assert bound.applied.io_binding is io_binding


def test_llm_through_onnxruntime_with_its_kv_cache_matches_eager(fake_ort, tmp_path):
    """The CPU EP runs the exported decoder; the CUDA workflow reuses the same export (one per model, precision)."""
    fake_ort(["CUDAExecutionProvider", "CPUExecutionProvider"])
    llm = dict(model="llama-2layer", precision="fp32", output_len=6)
    cpu = run_job(_job("onnxruntime", **{}).model_copy(update=llm), tmp_path)
    assert cpu.status == "ok", cpu.error
    assert cpu.correctness.passed and cpu.correctness.token_agreement == 1.0
    assert cpu.metrics.output_tokens == 6 and cpu.metrics.tokens_per_s > 0
    settings = cpu.metrics.settings
    assert cpu.metrics.applied.decode_loop == "greedy_onnx_kv_cache" and settings["onnx_export_cached"] is False
    cuda = run_job(_job("onnxruntime_cuda", io_binding=False).model_copy(update={**llm, "batch_size": 1}), tmp_path)
    assert cuda.status == "ok", cuda.error
    assert cuda.metrics.settings["onnx_export_cached"] is True and cuda.correctness.passed
    assert cuda.metrics.applied.io_binding is False
    assert cuda.metrics.applied.execution_providers[0] == "CUDAExecutionProvider"
