"""Several lanes on one GPU (--overlap): their workers' cold compiles overlap while every timed window stays
exclusive (workers/measurement/gate.py, the worker's side), and only as many workers run at once as the GPU's
memory holds."""

import fcntl
import os
import signal
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator, Optional

from mlcbench.schema import GpuInfo, JobSpec, ProcessTiming, Result
from mlcbench.schema.results import TimedWindow
from mlcbench.schema.protocol import GATE_LOCK, GATE_MEMBERS

# the share of the GPU's memory the lanes' workers may plan to use together (the rest: CUDA contexts, fragmentation)
MEMORY_SHARE = 0.9
SYNTHETIC_BYTES = 5 << 30
# an LLM process holds its weights, and for eager's fp32 reference the weights again in fp32 (half -> 2x), plus
# activations, KV caches and a CUDA context
LLM_WEIGHT_FACTOR = 2.2
LLM_EXTRA_BYTES = 3 << 30


def memory_estimate(job: JobSpec) -> int:
    """The bytes of GPU memory a worker process of the job is planned at."""
    weights = job.info.weight_bytes(job.precision) if job.info.kind == "llm" else None
    if weights is None:
        return SYNTHETIC_BYTES
    return int(LLM_WEIGHT_FACTOR * weights) + LLM_EXTRA_BYTES


class MemoryBudget:
    """The GPU memory the lanes of one GPU share: a lane's worker starts when its estimate fits beside those running
    (or when none runs: a job bigger than the GPU still gets its chance, alone)."""

    def __init__(self, gpu: Optional[GpuInfo]):
        total = gpu.memory_total_bytes if gpu is not None else None
        self.capacity = int(MEMORY_SHARE * total) if total else None
        self._used = 0
        self._running = 0
        self._changed = threading.Condition()

    @contextmanager
    def reserved(self, bytes_: int) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self.capacity is None or self._running == 0
                                   or self._used + bytes_ <= self.capacity)
            self._used += bytes_
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._used -= bytes_
                self._running -= 1
                self._changed.notify_all()


def resume_stopped(gate: Path) -> None:
    """Let every worker registered at the gate go on, unless a live worker holds the GPU alone (it lets them go on
    itself when its window closes): a worker killed inside its window left them stopped."""
    with open(gate / GATE_LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        try:
            for member in (gate / GATE_MEMBERS).glob("*"):
                try:
                    os.killpg(int(member.read_text(encoding="utf-8")), signal.SIGCONT)
                except (OSError, ValueError):
                    continue
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def processes_of(results: Iterable[Result]) -> list[ProcessTiming]:
    """Every stored process of the results (each series, cold and warm)."""
    return [process for result in results if result.metrics.latency is not None
            for process in result.metrics.latency.processes + result.metrics.latency.other_series]


def busy_s(processes: Iterable[ProcessTiming]) -> dict[Optional[str], float]:
    """Per GPU (by UUID), the seconds some process of it was alive: the union of their lifetimes."""
    spans: dict[Optional[str], list[tuple[datetime, datetime]]] = {}
    for process in processes:
        if process.launched_at is not None and process.ended_at is not None:
            spans.setdefault(process.gpu_uuid, []).append((process.launched_at, process.ended_at))
    busy = {}
    for gpu, intervals in spans.items():
        total, reach = 0.0, None
        for begin, end in sorted(intervals):
            if reach is None or begin > reach:
                total += (end - begin).total_seconds()
                reach = end
            elif end > reach:
                total += (end - reach).total_seconds()
                reach = end
        busy[gpu] = total
    return busy


def overlapping_windows(processes: Iterable[ProcessTiming]) -> list[tuple[TimedWindow, TimedWindow]]:
    """Pairs of timed windows of one GPU that overlap (none, where the gate held)."""
    by_gpu: dict[Optional[str], list[TimedWindow]] = {}
    for process in processes:
        if process.window is not None:
            by_gpu.setdefault(process.gpu_uuid, []).append(process.window)
    pairs = []
    for windows in by_gpu.values():
        ordered = sorted(windows, key=lambda window: window.opened_at)
        pairs += [(earlier, later) for earlier, later in zip(ordered, ordered[1:]) if later.opened_at < earlier.closed_at]
    return pairs


def lifetimes_overlap(processes: Iterable[ProcessTiming]) -> int:
    """How many processes began while another of their GPU was alive (compiles beside timing happened)."""
    by_gpu: dict[Optional[str], list[tuple[datetime, datetime]]] = {}
    for process in processes:
        if process.launched_at is not None and process.ended_at is not None:
            by_gpu.setdefault(process.gpu_uuid, []).append((process.launched_at, process.ended_at))
    overlapping = 0
    for spans in by_gpu.values():
        reach = None
        for begin, end in sorted(spans):
            overlapping += reach is not None and begin < reach
            reach = end if reach is None else max(reach, end)
    return overlapping
