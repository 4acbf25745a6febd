"""Runs jobs one after another and streams their results: the worker's main loop."""

import os
import platform
import socket
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from mlcbench.schema import Correctness, JobSpec, Metrics, Provenance, Result, Status, why_not_run
from mlcbench.schema.protocol import LAUNCHED_AT_ENV, STARTUP_ENV, Startup
from mlcbench.workers.measurement.clocks import read_clocks
from mlcbench.workers.measurement.dynamo_stats import dynamo_imported
from mlcbench.workers.measurement.gate import Gate
from mlcbench.workers.measurement.probes import gpu_info, host_cpu, host_cpus, package_versions
from mlcbench.workers.exchange import append_line, append_model
from mlcbench.workers.interface import Unsupported, error_reason


def run_jobs(jobs: list[JobSpec], results_path: Path, cache_dir: Path, progress_path: Optional[Path] = None) -> None:
    results_path.parent.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # a job's start-up runs from the host's launch of the worker, or from the end of the worker's previous job
    launched_at = _launched_at()
    gate = Gate.from_environment()
    if gate is not None:
        gate.join()
    try:
        for job in jobs:
            if progress_path is not None:
                append_line(progress_path, job.job_id)
            result = run_job(job, cache_dir, launched_at, gate)
            append_model(results_path, result)
            launched_at = result.provenance.ended_at
    finally:
        if gate is not None:
            gate.leave()


def _launched_at() -> datetime:
    given = os.environ.get(LAUNCHED_AT_ENV, "")
    try:
        return datetime.fromtimestamp(float(given), timezone.utc)
    except ValueError:  # a worker started by hand: from its own start
        return datetime.fromtimestamp(time.time() - time.process_time(), timezone.utc)


def write_calibration(path: Path, device: str, cache_dir: Path) -> None:
    from mlcbench.workers.measurement.calibration import calibrate

    gate = Gate.from_environment()
    if gate is None:
        append_model(path, calibrate(device, cache_dir))
        return
    gate.join()  # the ceilings are timed with the GPU alone, as every job's calls are
    try:
        with gate.exclusive(drain=device == "cuda"):
            calibration = calibrate(device, cache_dir)
    finally:
        gate.leave()
    append_model(path, calibration)


@dataclass
class Outcome:
    """How a job ended in this worker: what its Result carries besides the job and the provenance."""

    status: Status
    reason: Optional[str] = None  # one line: why unsupported / failed (interface.error_reason)
    error: Optional[str] = None  # the traceback of a failure
    metrics: Metrics = field(default_factory=Metrics)
    correctness: Optional[Correctness] = None
    timed_from: Optional[float] = None  # Measured.timed_from


def run_job(job: JobSpec, cache_dir: Path, launched_at: Optional[datetime] = None, gate: Optional[Gate] = None) -> Result:
    started = datetime.now(timezone.utc)
    launched_at = launched_at or started
    gpu = gpu_info() if job.device == "cuda" else None
    clocks = [read_clocks(gpu.uuid, "start")] if gpu and gpu.uuid else []
    try:
        outcome = _run(job, cache_dir, gate)
    except Unsupported as unsupported:
        outcome = Outcome("unsupported", str(unsupported))
    except Exception as exc:  # every failure becomes a result; the worker goes on with the next job
        outcome = Outcome("oom" if _is_oom(exc) else "failed", error_reason(exc), traceback.format_exc()[-8000:],
                          _memory_after_failure(job))
    finally:
        _release_memory(job)
    if gpu and gpu.uuid:
        clocks.append(read_clocks(gpu.uuid, "end"))
    ended = datetime.now(timezone.utc)
    host = socket.gethostname()
    return Result(
        job_id=job.job_id, job=job, status=outcome.status, reason=outcome.reason, error=outcome.error,
        metrics=_with_span(outcome, launched_at, ended, host, gpu.uuid if gpu else None, gate),
        correctness=outcome.correctness,
        provenance=Provenance(
            gpu=gpu, packages=package_versions(), python=platform.python_version(),
            hostname=host, host_cpu=host_cpu(), host_cpus=host_cpus(), started_at=started,
            ended_at=ended, startup=_startup(),
            clocks=[reading for reading in clocks if reading is not None],
        ),
    )


def _startup() -> Startup:
    return "fork" if os.environ.get(STARTUP_ENV) == "fork" else "exec"


def _with_span(outcome: Outcome, launched_at: datetime, ended: datetime, host: str,
               gpu_uuid: Optional[str], gate: Optional[Gate]) -> Metrics:
    """The process's timing with what it cost before its first timed call, compile excluded, its span and where it
    ran."""
    metrics, latency = outcome.metrics, outcome.metrics.latency
    if latency is None or outcome.timed_from is None:
        return metrics
    stopped, idle_s = {}, 0.0
    if gate is not None:  # time stood stopped, or waiting for the GPU alone, is no start-up (nor compile: compile_s)
        stopped = {"stopped_s": round(gate.stopped_s(launched_at.timestamp(), ended.timestamp()), 4)}
        window = latency.processes[0].window
        asked = window.opened_at.timestamp() - window.waited_s if window is not None else outcome.timed_from
        idle_s = gate.stopped_s(launched_at.timestamp(), asked) + (window.waited_s if window is not None else 0.0)
    startup_s = outcome.timed_from - launched_at.timestamp() - (metrics.compile_s or 0.0) - idle_s
    processes = [process.model_copy(update={"startup_s": round(startup_s, 4), "launched_at": launched_at,
                                            "ended_at": ended, "host": host, "gpu_uuid": gpu_uuid, **stopped})
                 for process in latency.processes]
    return metrics.model_copy(update={"latency": latency.model_copy(update={"processes": processes})})


def _run(job: JobSpec, cache_dir: Path, gate: Optional[Gate]) -> Outcome:
    import torch

    from mlcbench.workers.measurement.core import measure
    from mlcbench.workers.measurement.llm import LLM
    from mlcbench.workers.measurement.references import ReferenceCache
    from mlcbench.workers.measurement.synthetic import Synthetic
    from mlcbench.workers.workflows import load
    from mlcbench.workers.interface import WorkflowContext

    if job.device == "cuda" and not torch.cuda.is_available():
        raise _cuda_unavailable(torch)
    workflow = load(job.workflow)
    refusal = why_not_run(job.workflow, job.info)  # the planner refuses these too: a job file handed in directly
    if refusal:
        raise Unsupported(refusal)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job.precision]
    ctx = WorkflowContext(job=job, device=torch.device(job.device), dtype=dtype, cache_dir=cache_dir / job.workflow)
    if ctx.device.type == "cpu":  # the same intra-op threads in every process of a cell, not torch's guess of the day
        torch.set_num_threads(host_cpus() or 1)
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    info = job.info
    kind = LLM(info, ctx) if info.kind == "llm" else Synthetic(info, ctx)
    measured = measure(workflow, kind, ctx, ReferenceCache.under(cache_dir), gate)
    correctness = measured.correctness
    reason = None
    if correctness is not None and not correctness.passed:
        reason = "correctness check failed against eager" + (
            f": {correctness.not_finite}" if correctness.not_finite else "")
    return Outcome("ok", reason,
                   metrics=measured.metrics, correctness=correctness, timed_from=measured.timed_from)


def _cuda_unavailable(torch) -> Exception:
    """Why a CUDA job cannot start: unsupported where this torch has no CUDA or no GPU is visible; a failure that
    names CUDA's own error where this torch has CUDA and a GPU did not initialise (one worker of a sweep on an H100
    met this between two that ran: a lost process, not a workflow the GPU cannot run)."""
    no_gpu = Unsupported("job asks for CUDA but torch sees no GPU in this environment")
    if torch.version.cuda is None:
        return no_gpu
    try:
        torch.cuda.init()
    except Exception as error:
        if "no cuda gpus are available" in str(error).lower():
            return no_gpu
        return RuntimeError(f"CUDA did not initialise: {error}")
    return no_gpu


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
    if dynamo_imported():
        try:
            import torch._dynamo

            torch._dynamo.reset()  # compiled graphs hold the job's weights alive
        except Exception:
            pass
