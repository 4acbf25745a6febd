"""torchax for real on the CPU (JAX's CPU backend): synthetic models and the 2-layer LLM, checked against eager."""

import importlib.util
import os
import sys

import pytest
import torch

from mlcbench.schema import JobSpec, Result
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
def test_weights_reach_the_jax_device_without_a_copy(tmp_path):
    """The module's weights are handed to JAX through DLPack: each jax buffer is the torch tensor's own memory (a copy
    through the host cost 15-22 s of every Llama-2-7B process on an H200)."""
    from mlcbench.workers.models import synthetic
    from mlcbench.workers.interface import WorkflowContext
    from mlcbench.workers.workflows.torchax import Torchax
    from mlcbench.schema import MODELS

    job = _job("ffn-multilayer-small", "bf16")
    model, inputs = synthetic.build(MODELS[job.model], job, torch.bfloat16, torch.device("cpu"))
    addresses = [parameter.data_ptr() for parameter in model.parameters()]
    ctx = WorkflowContext(job=job, device=torch.device("cpu"), dtype=torch.bfloat16, cache_dir=tmp_path)
    Torchax().compile_module(model, inputs, ctx)
    moved = [parameter._elem for parameter in model.parameters()]
    assert [array.unsafe_buffer_pointer() for array in moved] == addresses
    assert {str(array.dtype) for array in moved} == {"bfloat16"}


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


_RUN_JOB = ("import sys; from pathlib import Path; from mlcbench.schema import JobSpec; "
            "from mlcbench.workers.runner import run_job; "
            "result = run_job(JobSpec.model_validate_json(sys.argv[1]), Path(sys.argv[2])); "
            "print(result.model_dump_json())")


def _run_process(job: JobSpec, cache_dir) -> Result:
    """run_job in a fresh interpreter: JAX's in-memory caches start empty, as a later worker process's do."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _RUN_JOB, job.model_dump_json(), str(cache_dir)], check=True,
                          capture_output=True, text=True, timeout=900)
    return Result.model_validate_json(done.stdout.splitlines()[-1])


@needs_torchax
def test_a_later_llm_process_loads_every_trace_and_program_and_is_labelled_warm(tmp_path):
    """The first process traces the forward once per sequence length, exports each trace and compiles each program
    (cold); a second process traces nothing and compiles nothing (warm): it loads every exported trace and finds every
    XLA program in JAX's cache, as JAX's own events count them, stored with the process."""
    from mlcbench.workers.stacks.jax_traces import TRACES

    job = _job("llama-2layer")
    first, second = _run_process(job, tmp_path), _run_process(job, tmp_path)
    assert first.status == second.status == "ok"
    cold, warm = first.metrics.cache_counts, second.metrics.cache_counts
    lengths = job.output_len  # the prompt's length, then one more per generated token but the last
    assert first.metrics.compile_cache == "cold" and cold.traces_exported == lengths and cold.traces_loaded == 0
    assert cold.jax_misses >= lengths
    assert second.metrics.compile_cache == "warm"
    assert (warm.traces_loaded, warm.traces_exported, warm.jax_misses) == (lengths, 0, 0)
    assert warm.jax_hits >= lengths
    process = second.metrics.worker_processes()[0]
    assert process.compile_cache == "warm" and process.cache_counts == warm
    assert second.correctness.passed and second.correctness.token_agreement == 1.0
    # the weights are jit arguments, not constants folded into the trace: each trace is far smaller than them
    weights = 2 * 32000 * 256 * 4  # llama-2layer's embedding and LM head alone, fp32
    traces = list((tmp_path / "torchax" / TRACES).rglob("*.jax_exported"))
    assert len(traces) == lengths and all(path.stat().st_size < weights / 10 for path in traces)


@needs_torchax
def test_a_synthetic_process_is_labelled_by_what_jax_s_cache_held(tmp_path):
    first, second = (_run_process(_job("ffn-small"), tmp_path) for _ in range(2))
    assert first.metrics.compile_cache == "cold" and first.metrics.cache_counts.jax_misses > 0
    assert second.metrics.compile_cache == "warm" and second.metrics.cache_counts.jax_misses == 0
    assert second.metrics.cache_counts.jax_hits > 0


@needs_torchax
def test_a_changed_model_option_version_or_shape_never_reuses_a_trace(monkeypatch):
    """The traces' folder is keyed by everything a trace depends on; the shape names the file."""
    import transformers

    from mlcbench.workers.stacks import jax_traces
    from mlcbench.workers.workflows.torchax import _LastLogits, _load
    from mlcbench.workers.interface import WorkflowContext

    _, env, _, _ = _load(WorkflowContext(job=_job("llama-2layer"), device=torch.device("cpu"), dtype=torch.float32,
                                         cache_dir=None))

    def model(**config):
        return _LastLogits(transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4, vocab_size=128,
            **config)))

    def key(module=None, platform="cpu", options="{}"):
        return jax_traces.trace_key(jax_traces.trace_parts(module or base, env, platform, options))

    base = model()
    reference = key()
    assert key(model()) == reference  # the same model again, other random weights: the same trace
    assert key(model(rope_theta=500000.0)) != reference  # the same weights' shapes, another model
    assert key(model().to(torch.bfloat16)) != reference
    assert key(options='{"compile_mode":"x"}') != reference
    assert key(platform="gpu") != reference
    for package in jax_traces.TRACED_PACKAGES:
        with monkeypatch.context() as patch:
            patch.setattr(jax_traces, "_version", lambda name, changed=package: f"{name}-other" if name == changed
                          else jax_traces.importlib.metadata.version(name))
            assert key() != reference, package
    import jax.numpy as jnp

    forward = object.__new__(jax_traces.ExportedForward)
    forward.folder = jax_traces.Path("traces")
    assert forward.path(jnp.zeros((2, 8), jnp.int32)) != forward.path(jnp.zeros((2, 9), jnp.int32))
    assert forward.path(jnp.zeros((2, 8), jnp.int32)) != forward.path(jnp.zeros((4, 8), jnp.int32))
