"""A store of fixture results: two GPUs, two envs, LLM and synthetic models, every kind of failure."""

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import pytest

from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.fractions import decode_step_bytes
from mlcbench.orchestrator import stats
from mlcbench.schema import GPUS, Applied, Correctness, GpuInfo, JobSpec, Metrics, ProcessTiming, Provenance, Result, Timing

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
GPU_INFO = {"h100": GpuInfo(name="NVIDIA H100 80GB HBM3", driver="580.1"),
            "h200": GpuInfo(name="NVIDIA H200", driver="580.1"),
            "rtx4090": GpuInfo(name="NVIDIA GeForce RTX 4090", driver="575.2")}
DIGEST = {"local": None, "triton-2504": "sha256:" + "ab" * 32}
TORCH = {"local": "2.11.0", "triton-2504": "2.7.0a0"}

# tokens/s of tinyllama-1.1b (bf16), per (gpu, env, workflow, batch): every key differs, so a speedup taken against
# the wrong eager row gives a wrong number
TINYLLAMA_TOKENS = {
    ("h100", "local", "eager", 1): 50.0, ("h100", "local", "eager", 4): 200.0,
    ("h100", "local", "torch_compile_static", 1): 250.0, ("h100", "local", "torch_compile_static", 4): 700.0,
    ("rtx4090", "local", "eager", 1): 40.0, ("rtx4090", "local", "eager", 4): 120.0,
    ("rtx4090", "local", "torch_compile_static", 1): 100.0, ("rtx4090", "local", "torch_compile_static", 4): 420.0,
    ("h100", "triton-2504", "eager", 1): 45.0, ("h100", "triton-2504", "eager", 4): 180.0,
    ("h100", "triton-2504", "torch_compile_static", 1): 180.0, ("h100", "triton-2504", "torch_compile_static", 4): 540.0,
}
# TFLOPS of ffn-tinyllama (bf16) on h100, local
FFN_TFLOPS = {("eager", 1): 100.0, ("eager", 64): 400.0, ("torch_compile", 1): 150.0, ("torch_compile", 64): 600.0}
FAILED_CHECK = ("h100", "local", "torch_compile_static", 4)
BOUND_FRACTION = 0.2


def latency(processes: list[list[float]]) -> Timing:
    """A cell's timing over worker processes (each a list of per-call ms), combined as the sweep combines them."""
    return stats.combine([ProcessTiming(samples_ms=calls) for calls in processes], "cuda_events", 0.02)


def _steady(median_ms: float) -> Timing:
    """Three processes whose medians agree within 0.4 %: every speedup between two of these is significant."""
    return latency([[median_ms * level * f for f in (0.995, 1.0, 1.005)] for level in (0.998, 1.0, 1.002)])


def make_result(model: str, workflow: str, batch: int, gpu: str, env: str, status: str = "ok",
                reason: Optional[str] = None, tokens_per_s: Optional[float] = None, tflops: Optional[float] = None,
                passed: Optional[bool] = None, compile_s: Optional[float] = None, decode_loop: Optional[str] = None,
                ended: datetime = T0, precision: Optional[str] = None, seed: int = 0,
                host_cpu: Optional[str] = None, host_cpus: Optional[int] = None) -> Result:
    job = JobSpec(model=model, workflow=workflow, batch_size=batch, seed=seed,
                  precision=precision or ("fp16" if model.startswith("llama2") else "bf16"))
    ran = status == "ok"
    # the time a figure comes from: tokens/s = batch x 32 / time; TFLOPS proportional to 1 / time
    timing = _steady(batch * 32 / tokens_per_s * 1e3 if tokens_per_s else 1e3 / tflops if tflops else 10.0)
    if tokens_per_s:  # a decode step of the timed calls at BOUND_FRACTION of the GPU's bandwidth spec
        step_ms = decode_step_bytes(job) / (BOUND_FRACTION * GPUS[gpu].bandwidth_gbs * 1e9) * 1e3
        timing = timing.model_copy(update={"step_median_ms": step_ms, "step_ci_low_ms": step_ms * 0.99,
                                           "step_ci_high_ms": step_ms * 1.01})
    metrics = Metrics(
        latency=timing if ran else None,
        compile_s=compile_s if ran else None, load_s=1.5 if ran else None,
        torch_peak_mem_bytes=2_000_000_000 * batch if ran else None, tokens_per_s=tokens_per_s, tflops=tflops,
        bandwidth_fraction=BOUND_FRACTION if tokens_per_s else None,
        applied=Applied(accumulation="fp32" if tflops else None, decode_loop=decode_loop))
    correctness = None if passed is None else Correctness(cosine=0.999 if passed else 0.9, rel_l2_error=0.01,
                                                          token_agreement=1.0 if passed else 0.25, tolerance=0.02,
                                                          passed=passed)
    provenance = Provenance(env=env, gpu_tag=gpu, gpu=GPU_INFO[gpu], image_digest=DIGEST[env],
                            packages={"torch": TORCH[env], "transformers": "4.56.0"}, git_rev="abc123",
                            host_cpu=host_cpu, host_cpus=host_cpus,
                            started_at=ended - timedelta(minutes=1), ended_at=ended)
    return Result(job_id=job.job_id, job=job, status=status, reason=reason, metrics=metrics, correctness=correctness,
                  provenance=provenance)


def fixture_results() -> list[Result]:
    results = []
    for (gpu, env, workflow, batch), tokens in TINYLLAMA_TOKENS.items():
        passed = None if workflow == "eager" else (gpu, env, workflow, batch) != FAILED_CHECK
        results.append(make_result("tinyllama-1.1b", workflow, batch, gpu, env, tokens_per_s=tokens, passed=passed,
                                   compile_s=5.0 if workflow == "eager" else 30.0,
                                   decode_loop="hf_generate"))
    results += [
        make_result("llama2-7b", "eager", 1, "rtx4090", "local", tokens_per_s=30.0, compile_s=4.0),
        make_result("llama2-7b", "eager", 64, "rtx4090", "local", status="oom", reason="CUDA out of memory"),
        make_result("llama2-7b", "torch_tensorrt", 1, "rtx4090", "local", status="unsupported",
                    reason="local env: torch_tensorrt not importable"),
        make_result("llama2-7b", "torch_compile", 1, "rtx4090", "local", status="failed",
                    reason="RuntimeError: inductor lowering"),
        make_result("llama2-7b", "torch_tensorrt", 1, "h100", "triton-2504", tokens_per_s=60.0, compile_s=400.0,
                    decode_loop="greedy_no_kv_cache", passed=True),
    ]
    results += [make_result("ffn-tinyllama", workflow, batch, "h100", "local", tflops=tflops,
                            compile_s=1.0 if workflow == "eager" else 20.0,
                            passed=None if workflow == "eager" else True)
                for (workflow, batch), tflops in FFN_TFLOPS.items()]
    return results


def store_with(path: Path, results: list[Result]) -> Store:
    store = Store(f"sqlite:///{path}")
    for result in results:
        store.put(result)
    return store


@pytest.fixture
def results() -> list[Result]:
    return fixture_results()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "fixture.db"
    store_with(path, fixture_results())
    return path
