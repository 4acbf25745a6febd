"""torch.compile(backend="openxla") against stand-in torch_xla modules (current and older device/sync names); the
"XLA device" is the CPU, so the compiled module or LLM still runs and is compared with eager. The real torch_xla runs in
the openxla image (tests/e2e/test_openxla_image.py)."""

import importlib.abc
import importlib.util
import os
import sys
import types

import pytest
import torch
from torch._dynamo.backends import registry

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job

PJRT = ("PJRT_DEVICE", "GPU_NUM_DEVICES", "PJRT_ALLOCATOR_PREALLOCATE")


@pytest.fixture
def fake_xla(monkeypatch):
    def install(current_api, cuda_plugin=False):
        calls = {"backend": 0, "sync": 0, "mark_step": 0, "wait": 0, "env_at_import": None}
        for key in PJRT:
            monkeypatch.delenv(key, raising=False)

        def count(key):
            return lambda: calls.__setitem__(key, calls[key] + 1)

        def backend(gm, example_inputs):
            calls["backend"] += 1
            return gm.forward

        package = types.ModuleType("torch_xla")
        package.__version__ = "2.5.0"
        xm = types.ModuleType("torch_xla.core.xla_model")
        xm.mark_step, xm.wait_device_ops = count("mark_step"), count("wait")
        if current_api:
            package.device, package.sync = (lambda: torch.device("cpu")), count("sync")
        else:
            xm.xla_device = lambda: torch.device("cpu")

        class Loader(importlib.abc.Loader):  # records the environment torch_xla sees as it loads
            def create_module(self, spec):
                return package

            def exec_module(self, module):
                calls["env_at_import"] = {key: os.environ.get(key) for key in PJRT}

        class Finder(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch_xla_cuda_plugin" and cuda_plugin:
                    return importlib.util.spec_from_loader(name, None)
                return importlib.util.spec_from_loader(name, Loader()) if name == "torch_xla" else None

        monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
        monkeypatch.setitem(sys.modules, "torch_xla", None)
        monkeypatch.delitem(sys.modules, "torch_xla")  # undone in reverse: the key is gone again after the test
        monkeypatch.setitem(sys.modules, "torch_xla.core", types.SimpleNamespace(xla_model=xm))
        monkeypatch.setitem(sys.modules, "torch_xla.core.xla_model", xm)
        metrics = types.ModuleType("torch_xla.debug.metrics")  # every stand-in graph counts as one XLA compilation
        metrics.metric_data = lambda name: (calls["backend"], 0.0, []) if name == "CompileTime" else None
        monkeypatch.setitem(sys.modules, "torch_xla.debug", types.SimpleNamespace(metrics=metrics))
        monkeypatch.setitem(sys.modules, "torch_xla.debug.metrics", metrics)
        registry._lazy_import()  # torch registers its own "openxla" lazily: let it, then stand in for it
        monkeypatch.setitem(registry._BACKENDS, "openxla", None)
        monkeypatch.setitem(registry._COMPILER_FNS, "openxla", backend)
        return calls

    return install


def _job(model="ffn-small", workflow="torch_compile_openxla", **fields):
    return JobSpec(model=model, workflow=workflow, precision="fp32", batch_size=2, input_len=8, output_len=4,
                   device="cpu", warmup=1, repeats=2, **fields)


@pytest.mark.parametrize("current_api", [True, False])
def test_compiles_with_openxla_and_syncs_every_timed_call(fake_xla, tmp_path, current_api):
    calls = fake_xla(current_api)
    result = run_job(_job(), tmp_path)
    assert result.status == "ok", result.error
    assert calls["backend"] == 1  # static shapes: one graph, no recompiles
    flushes = calls["sync"] if current_api else calls["mark_step"]
    assert flushes == calls["wait"] == 1 + 1 + 2  # first call, warm-up, repeats
    assert calls["env_at_import"] == {"PJRT_DEVICE": "CPU", "GPU_NUM_DEVICES": None, "PJRT_ALLOCATOR_PREALLOCATE": None}
    assert result.metrics.applied.backend == "openxla" and result.metrics.settings["PJRT_DEVICE"] == "CPU"
    assert result.correctness.passed


def test_gpu_jobs_get_the_pjrt_cuda_environment(fake_xla, tmp_path):
    from mlcbench.schema import MODELS
    from mlcbench.workers.models import synthetic
    from mlcbench.workers.interface import WorkflowContext
    from mlcbench.workers.workflows.torch_compile_openxla import TorchCompileOpenXLA

    calls = fake_xla(True, cuda_plugin=True)
    job = _job()
    model, inputs = synthetic.build(MODELS[job.model], job, torch.float32, torch.device("cpu"))
    # a CUDA job as the openxla env sees it; the stand-in XLA device is still the CPU
    ctx = WorkflowContext(job=job, device=torch.device("cuda"), dtype=torch.float32, cache_dir=tmp_path)
    prepared = TorchCompileOpenXLA().compile_module(model, inputs, ctx)
    expected = {"PJRT_DEVICE": "CUDA", "GPU_NUM_DEVICES": "1", "PJRT_ALLOCATOR_PREALLOCATE": "false"}
    assert calls["env_at_import"] == expected
    assert {key: prepared.notes[key] for key in PJRT} == expected


def test_gpu_jobs_without_the_cuda_plugin_are_unsupported_before_pjrt_starts(fake_xla, tmp_path):
    from mlcbench.workers.interface import Unsupported, WorkflowContext
    from mlcbench.workers.workflows.torch_compile_openxla import TorchCompileOpenXLA

    calls = fake_xla(True, cuda_plugin=False)
    ctx = WorkflowContext(job=_job(), device=torch.device("cuda"), dtype=torch.float32, cache_dir=tmp_path)
    with pytest.raises(Unsupported, match="CUDA PJRT plugin \\(torch_xla_cuda_plugin\\).*only on Google's storage"):
        TorchCompileOpenXLA().compile_module(torch.nn.Linear(2, 2), (torch.ones(1, 2),), ctx)
    assert calls["env_at_import"] is None and "PJRT_DEVICE" not in os.environ


def test_an_environment_already_set_is_kept_and_recorded(fake_xla, monkeypatch, tmp_path):
    fake_xla(True)
    monkeypatch.setenv("PJRT_DEVICE", "CUDA_CUSTOM")
    result = run_job(_job(), tmp_path)
    assert result.metrics.settings["PJRT_DEVICE"] == "CUDA_CUSTOM"


@pytest.mark.parametrize("workflow, cache", [("torch_compile_openxla", "dynamic"),
                                             ("torch_compile_openxla_static", "static")])
def test_llms_generate_with_the_compiled_forward_and_count_graphs(fake_xla, tmp_path, workflow, cache):
    calls = fake_xla(True)
    result = run_job(_job(model="llama-2layer", workflow=workflow), tmp_path)
    assert result.status == "ok", result.error
    assert result.metrics.output_tokens == 4
    if cache == "dynamic":
        # the stand-in backend runs the graph as it is (gm.forward) on eager's own cache: eager's kernels, logits bit
        # for bit eager's, which the check must call out for a workflow whose row does not say it runs eager's kernels
        assert result.correctness.identical_to_reference and not result.correctness.passed
    else:  # a static cache attends over its padded length: not eager's bits, within the tolerance
        assert result.correctness.passed and not result.correctness.identical_to_reference
    applied, settings = result.metrics.applied, result.metrics.settings
    assert (applied.backend, applied.kv_cache, applied.decode_loop) == ("openxla", cache, "hf_generate")
    assert settings["compiled"] == "model.forward"
    assert applied.compiled_graphs == calls["backend"] > 0  # every graph went through the openxla backend
    assert settings["xla_compiles"] == calls["backend"]
    assert calls["sync"] == calls["wait"] >= 1 + 1 + 2  # first call, warm-up, repeats
    if cache == "static":  # one shape for prefill, one for every decode step
        assert applied.compiled_graphs <= 2


def test_the_xla_runner_records_xla_compiles_at_the_first_call_and_in_all():
    from mlcbench.workers.interface import Generation
    from mlcbench.workers.workflows.torch_compile_openxla import XLAGenerateRunner

    class Generate:
        def generate(self, input_ids, max_new_tokens, with_logits=False, on_token=None, forced_tokens=None):
            return Generation(tokens=torch.zeros(input_ids.shape[0], max_new_tokens, dtype=torch.long))

    compiles = iter([5, 7, 7])
    notes = {}
    runner = XLAGenerateRunner(Generate(), torch.device("cpu"), notes, compiles=lambda: next(compiles))
    for _ in range(3):
        assert runner.generate(torch.ones(2, 3, dtype=torch.long), 4).tokens.shape == (2, 4)
    assert (notes["xla_compiles_first_call"], notes["xla_compiles"]) == (5, 7)
