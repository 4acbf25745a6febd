"""torchax for real on the CPU (JAX's CPU backend): synthetic models and the 2-layer LLM, checked against eager."""

import importlib.util
import os
import sys

import pytest
import torch

from mlcbench.schema import JobSpec
from mlcbench.workers.runner import run_job

needs_torchax = pytest.mark.skipif(importlib.util.find_spec("torchax") is None or importlib.util.find_spec("jax") is None,
                                   reason="torchax and jax are not installed")


def _job(model, precision="fp32", **fields):
    return JobSpec(model=model, workflow="torchax", precision=precision, batch_size=2, input_len=8, output_len=6,
                   device="cpu", warmup=1, repeats=2, **fields)


@needs_torchax
@pytest.mark.parametrize("model,precision", [("ffn-small", "fp32"), ("matmul-relu-small", "fp32"),
                                             ("ffn-multilayer-small", "bf16")])
def test_synthetic_models_match_eager(monkeypatch, tmp_path, model, precision):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    result = run_job(_job(model, precision), tmp_path)
    assert result.status == "ok", result.error
    assert result.correctness.passed and result.correctness.rel_l2_error <= result.correctness.tolerance
    settings = result.metrics.settings
    assert settings["jax_backend"] == "cpu" and result.metrics.applied.backend == "torchax (jax.jit)"
    assert settings["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"  # set before jax could read it


@needs_torchax
def test_timed_calls_return_jax_arrays_and_sync_blocks_on_them(tmp_path):
    import jax

    from mlcbench.workers.models import synthetic
    from mlcbench.workers.interface import WorkflowContext
    from mlcbench.workers.workflows.torchax import Torchax
    from mlcbench.schema import MODELS

    job = _job("ffn-small")
    model, inputs = synthetic.build(MODELS[job.model], job, torch.float32, torch.device("cpu"))
    reference = model(*inputs)
    ctx = WorkflowContext(job=job, device=torch.device("cpu"), dtype=torch.float32, cache_dir=tmp_path)
    prepared = Torchax().compile_module(model, inputs, ctx)
    out = prepared.runner(*inputs)
    assert isinstance(out, jax.Array)  # no host copy inside the timed call
    assert prepared.sync is jax.block_until_ready
    prepared.sync(out)
    torch.testing.assert_close(torch.as_tensor(out), reference.detach(), rtol=1e-4, atol=1e-4)


@needs_torchax
def test_llm_greedy_loop_matches_eager_tokens(tmp_path):
    result = run_job(_job("llama-2layer"), tmp_path)
    assert result.status == "ok", result.error
    assert result.metrics.output_tokens == 6
    assert result.correctness.passed and result.correctness.token_agreement == 1.0
    assert result.metrics.applied.decode_loop == "greedy_no_kv_cache"


def test_missing_torchax_is_unsupported(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torchax", None)
    result = run_job(_job("ffn-small"), tmp_path)
    assert result.status == "unsupported"
    assert "not importable" in result.reason and "torchax" in result.reason.split(":", 1)[1]


@needs_torchax
def test_a_later_process_loads_the_xla_programs_an_earlier_one_compiled(tmp_path):
    """JAX's persistent compilation cache lives in the workflow's cache folder: the first process writes a program
    per jitted shape there, a second process (a fresh interpreter) finds them, and a program found is not compiled
    again, so none is written again (each file's modification time stays)."""
    import subprocess

    from mlcbench.workers.workflows.torchax import JAX_CACHE

    script = ("import sys; from pathlib import Path; from mlcbench.schema import JobSpec; "
              "from mlcbench.workers.runner import run_job; "
              "job = JobSpec.model_validate_json(sys.argv[1]); "
              "result = run_job(job, Path(sys.argv[2])); assert result.status == 'ok', result.error")
    cache = tmp_path / "torchax" / JAX_CACHE

    def run_process() -> dict[str, int]:
        subprocess.run([sys.executable, "-c", script, _job("ffn-small").model_dump_json(), str(tmp_path)], check=True,
                       timeout=600)
        return {path.name: path.stat().st_mtime_ns for path in cache.iterdir()}

    first = run_process()
    assert first  # the programs the first process compiled
    assert run_process() == first  # the second compiled nothing new: it loaded them
