"""Runs jobs one after another and streams their results: the worker's main loop."""

import functools
import os
import platform
import socket
import traceback
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Optional

from mlcbench.schema import GpuInfo, JobSpec, Metrics, Provenance, Result, why_not_run
from mlcbench.workers.measurement.clocks import read_clocks
from mlcbench.workers.exchange import append_line, append_model
from mlcbench.workers.workflows.base import Unsupported

TRACKED_PACKAGES = ("torch", "transformers", "onnxruntime", "onnxruntime-gpu", "onnx", "tensorrt", "torch_tensorrt",
                    "tensorrt_llm", "torch_xla", "jax", "jaxlib", "torchax", "triton", "numpy")


def run_jobs(jobs: list[JobSpec], results_path: Path, cache_dir: Path, progress_path: Optional[Path] = None) -> None:
    results_path.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        if progress_path is not None:
            append_line(progress_path, job.job_id)
        append_model(results_path, run_job(job, cache_dir))


def write_calibration(path: Path, device: str) -> None:
    from mlcbench.workers.measurement.calibration import calibrate

    append_model(path, calibrate(device))


def run_job(job: JobSpec, cache_dir: Path) -> Result:
    started = datetime.now(timezone.utc)
    gpu = gpu_info() if job.device == "cuda" else None
    clocks = [read_clocks(gpu.uuid, "start")] if gpu and gpu.uuid else []
    try:
        status, reason, error, metrics, correctness = _run(job, cache_dir)
    except Unsupported as unsupported:
        status, reason, error, metrics, correctness = "unsupported", str(unsupported), None, Metrics(), None
    except Exception as exc:  # every failure becomes a result; the worker goes on with the next job
        status = "oom" if _is_oom(exc) else "failed"
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:500]
        error = traceback.format_exc()[-8000:]
        metrics, correctness = _memory_after_failure(job), None
    finally:
        _release_memory(job)
    if gpu and gpu.uuid:
        clocks.append(read_clocks(gpu.uuid, "end"))
    return Result(
        job_id=job.job_id, job=job, status=status, reason=reason, error=error, metrics=metrics,
        correctness=correctness,
        provenance=Provenance(
            gpu=gpu, packages=_package_versions(), python=platform.python_version(),
            hostname=socket.gethostname(), host_cpu=host_cpu(), host_cpus=host_cpus(), started_at=started,
            ended_at=datetime.now(timezone.utc),
            clocks=[reading for reading in clocks if reading is not None],
        ),
    )


def _run(job: JobSpec, cache_dir: Path):
    import torch

    from mlcbench.workers.measurement import llm, synthetic
    from mlcbench.workers.workflows import load
    from mlcbench.workers.workflows.base import WorkflowContext

    if job.device == "cuda" and not torch.cuda.is_available():
        raise Unsupported("job asks for CUDA but torch sees no GPU in this environment")
    workflow = load(job.workflow)
    refusal = why_not_run(job.workflow, job.info)  # the planner refuses these too: a job file handed in directly
    if refusal:
        raise Unsupported(refusal)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.precision]
    ctx = WorkflowContext(job=job, device=torch.device(job.device), dtype=dtype, cache_dir=cache_dir / job.workflow)
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    info = job.info
    module = llm if info.kind == "llm" else synthetic
    metrics, correctness = module.measure(workflow, info, ctx)
    status, reason = "ok", None
    if correctness is not None and not correctness.passed:
        reason = "correctness check failed against eager"
    return status, reason, None, metrics.model_copy(update={"settings": dict(ctx.settings), "applied": ctx.applied}), correctness


def _is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    text = str(exc).lower()
    return "out of memory" in text or "outofmemory" in text


def _memory_after_failure(job: JobSpec) -> Metrics:
    """The memory figures an OOM result carries: the allocator's peak and what the device had."""
    if job.device != "cuda":
        return Metrics()
    try:
        import torch

        free, total = torch.cuda.mem_get_info()
        return Metrics(torch_peak_mem_bytes=torch.cuda.max_memory_allocated(),
                       settings={"device_free_bytes": free, "device_total_bytes": total})
    except Exception:
        return Metrics()


def _release_memory(job: JobSpec) -> None:
    import gc

    gc.collect()
    if job.device == "cuda":
        try:
            import torch

            torch.cuda.empty_cache()
        except Exception:
            pass
    try:
        import torch._dynamo

        torch._dynamo.reset()  # compiled graphs hold the job's weights alive
    except Exception:
        pass


@functools.cache  # the worker sees one GPU, whose identity does not change while it runs
def gpu_info() -> Optional[GpuInfo]:
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
    except Exception:
        return None
    uuid = f"GPU-{props.uuid}"
    info = dict(name=props.name, uuid=uuid, compute_capability=f"{props.major}.{props.minor}",
                memory_total_bytes=props.total_memory)
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        info.update(
            index=pynvml.nvmlDeviceGetIndex(handle),
            driver=pynvml.nvmlSystemGetDriverVersion(),
            sm_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_clock_mhz=pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        )
    except Exception:
        pass
    return GpuInfo(**info)


@functools.cache  # the CPU does not change while a worker runs
def host_cpu() -> Optional[str]:
    """The CPU's model name: /proc/cpuinfo's on Linux (a container's is the host's), else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def host_cpus() -> Optional[int]:
    """The logical CPUs this process may run on: its affinity (a container's cpuset, a Slurm task's CPUs)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


@functools.cache  # installed versions do not change while a worker runs; reading them costs ~15 ms
def _package_versions() -> dict[str, str]:
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions
