"""Torch-TensorRT workflows against stand-in torch_tensorrt modules of the versions the envs pin (2.7, 2.9) and of
2.10, where explicit typing became the default and enabled_precisions raises."""

import sys
import types

import pytest
import torch
from torch._dynamo.backends import registry

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job
from mlcbench.workers.stacks.trt_settings import version_tuple


class FakeInput:
    def __init__(self, min_shape, opt_shape, max_shape, dtype):
        self.min_shape, self.opt_shape, self.max_shape, self.dtype = min_shape, opt_shape, max_shape, dtype


def _check_settings(version, kwargs):
    """What the real CompilationSettings would refuse."""
    if version_tuple(version) >= (2, 10) and "enabled_precisions" in kwargs:
        raise ValueError("enabled_precisions is deprecated with use_explicit_typing (the default)")
    if kwargs.get("use_fp32_acc") and not (kwargs.get("use_explicit_typing") or version_tuple(version) >= (2, 10)):
        raise ValueError("use_fp32_acc needs use_explicit_typing")


@pytest.fixture
def fake_trt(monkeypatch):
    """Installs a torch_tensorrt of the given version; returns what the workflow called it with."""

    def install(version):
        calls = {"compile": [], "save": [], "backend": []}

        def dynamo_compile(exported, inputs, **kwargs):
            _check_settings(version, kwargs)
            calls["compile"].append({"inputs": inputs, **kwargs})
            return exported.module()  # run the exported graph: the loop around it is what is under test

        def save(module, path, inputs):
            calls["save"].append(path)
            torch.export.save(torch.export.export(module, tuple(inputs)), path)

        def backend(gm, example_inputs, options):
            _check_settings(version, options)
            calls["backend"].append(options)
            return gm.forward

        module = types.ModuleType("torch_tensorrt")
        module.__version__ = version
        module.dynamo = types.SimpleNamespace(compile=dynamo_compile)
        module.save = save
        module.Input = FakeInput
        monkeypatch.setitem(sys.modules, "torch_tensorrt", module)
        monkeypatch.setitem(registry._BACKENDS, "tensorrt", None)
        monkeypatch.setitem(registry._COMPILER_FNS, "tensorrt", backend)
        return calls

    return install


def _job(workflow, model="ffn-small", precision="fp16", **options):
    return JobSpec(model=model, workflow=workflow, precision=precision, batch_size=2, input_len=8, output_len=6,
                   device="cpu", warmup=0, repeats=1, options=options)


@pytest.mark.parametrize("version", ["2.7.0", "2.9.0a0", "2.10.0"])
def test_torch_compile_tensorrt_passes_version_aware_settings(fake_trt, tmp_path, version):
    calls = fake_trt(version)
    result = run_job(_job("torch_compile_tensorrt", min_block_size=3), tmp_path)
    assert result.status == "ok", result.reason
    (options,) = calls["backend"]
    assert options["min_block_size"] == 3 and options["use_fp32_acc"] is False
    assert options["use_python_runtime"] is False
    if version == "2.10.0":
        assert "enabled_precisions" not in options
        assert result.metrics.settings["use_explicit_typing"] is True
    else:
        assert options["enabled_precisions"] == {torch.float16}
        assert result.metrics.settings["enabled_precisions"] == "float16"
    assert result.metrics.accumulation == "fp16"
    assert result.metrics.settings["torch_tensorrt"] == version
    assert result.correctness.passed


@pytest.mark.parametrize("version", ["2.7.0", "2.10.0"])
def test_fp32_accumulation_uses_explicit_typing(fake_trt, tmp_path, version):
    calls = fake_trt(version)
    result = run_job(_job("torch_compile_tensorrt", fp32_accumulation=True), tmp_path)
    assert result.status == "ok", result.reason
    (options,) = calls["backend"]
    assert options["use_fp32_acc"] is True and options["min_block_size"] == 5
    if version == "2.7.0":
        assert options["use_explicit_typing"] is True and options["enabled_precisions"] == {torch.float32}
    assert result.metrics.accumulation == "fp32"


@pytest.mark.parametrize("version", ["2.7.0", "2.10.0"])
def test_torch_tensorrt_aot_builds_saves_into_cache_and_reloads(fake_trt, tmp_path, version):
    calls = fake_trt(version)
    result = run_job(_job("torch_tensorrt", precision="fp32"), tmp_path)
    assert result.status == "ok", result.reason
    (compiled,) = calls["compile"]
    assert [tuple(t.shape) for t in compiled["inputs"]] == [(2, 8, 256)]
    assert ("enabled_precisions" in compiled) == (version == "2.7.0")
    (path,) = calls["save"]
    assert path.startswith(str(tmp_path / "torch_tensorrt")) and result.metrics.settings["saved_program"] == path
    assert result.metrics.accumulation == "fp32"
    assert result.correctness.passed


def test_torch_tensorrt_llm_greedy_loop_over_dynamic_sequence_engine(fake_trt, tmp_path):
    calls = fake_trt("2.7.0")
    result = run_job(_job("torch_tensorrt", model="llama-2layer", precision="fp32"), tmp_path)
    assert result.status == "ok", result.reason
    (compiled,) = calls["compile"]
    (spec,) = compiled["inputs"]
    assert (spec.min_shape, spec.opt_shape, spec.max_shape, spec.dtype) == ((2, 8), (2, 10), (2, 13), torch.int64)
    assert compiled["enabled_precisions"] == {torch.float32}
    assert result.metrics.applied.decode_loop == "greedy_no_kv_cache"
    assert result.metrics.output_tokens == 6
    assert result.correctness.passed and result.correctness.token_agreement == 1.0


def test_torch_compile_tensorrt_refuses_llms_with_reason(fake_trt, tmp_path):
    fake_trt("2.7.0")
    result = run_job(_job("torch_compile_tensorrt", model="llama-2layer", precision="fp32"), tmp_path)
    assert result.status == "unsupported"
    assert "static KV cache" in result.reason


@pytest.mark.parametrize("workflow", ["torch_compile_tensorrt", "torch_tensorrt"])
def test_missing_torch_tensorrt_is_unsupported(monkeypatch, tmp_path, workflow):
    monkeypatch.setitem(sys.modules, "torch_tensorrt", None)  # import raises ImportError
    result = run_job(_job(workflow), tmp_path)
    assert result.status == "unsupported"
    assert "torch_tensorrt not importable" in result.reason
