"""Timing and memory measurement, the same for every workflow: warm-up, then timed repeats."""

import math
import statistics
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Protocol, Sequence

from mlcbench.schema import Clocks, ProcessTiming, Timing


# a process's calls kept in the store, evenly spread in call order (a minimum window can time thousands of sub-ms calls)
STORED_SAMPLES = 500


def summarize(samples_ms: list[float], method: str) -> Timing:
    ordered = sorted(samples_ms)
    mean = statistics.fmean(ordered)
    stdev = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return Timing(
        median_ms=statistics.median(ordered),
        p10_ms=_percentile(ordered, 0.10),
        p90_ms=_percentile(ordered, 0.90),
        mean_ms=mean,
        cv=stdev / mean if mean > 0 else 0.0,
        repeats=len(ordered),
        method=method,
        processes=[ProcessTiming(samples_ms=samples_ms[::math.ceil(len(samples_ms) / STORED_SAMPLES)],
                                 timed_calls=len(samples_ms))],
    )


def for_this_process(timing: Timing, **fields: object) -> Timing:
    """The worker's Timing with fields of its one process (ProcessTiming) filled in."""
    (process,) = timing.processes
    return timing.model_copy(update={"processes": [process.model_copy(update=fields)]})


def _percentile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class WindowEdge(Protocol):
    """Read at the edges of the timed calls' window: start() just before the first timed call (the warm-up has
    finished), stop() just after the last has (its end event, or its sync)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


CLOCK_READINGS = 10  # NVML readings per process's timed calls, spread evenly over them


def time_calls(fn: Callable[[], object], warmup: int, repeats: int, cuda: bool,
               sync: Optional[Callable[[object], None]] = None,
               read_clocks: Optional[Callable[[], Optional[Clocks]]] = None,
               edges: Sequence[WindowEdge] = (),
               after_each: Optional[Callable[[object], None]] = None, min_window_s: float = 0.0) -> Timing:
    """Median and spread of at least `repeats` calls of fn after `warmup` calls: more where `repeats` calls end before
    `min_window_s` has passed since the first began (a window long enough for the energy counter, every call kept).

    On CUDA each call sits between two events on the current stream; `sync` blocks on results that live outside
    torch's stream (XLA, ONNX Runtime) before the end event is read. `read_clocks` is called during some of the timed
    calls: after the end event is queued and before waiting for it (a call that does not block is still running on
    the GPU then, and the events' interval is already fixed, so the reading costs the figure nothing). `edges` are
    read just before the first timed call and just after the last. `after_each` is handed each timed call's
    output outside its timed interval (on CUDA its work queues after the end event, before the next call's start).
    """
    for _ in range(warmup):
        _finish(fn(), cuda, sync)
    samples: list[float] = []
    if cuda:
        import torch

        readings = min(CLOCK_READINGS, repeats)
        read_at = {round(i * (repeats - 1) / max(readings - 1, 1)) for i in range(readings)}
        clocks: list[Clocks] = []
        for edge in edges:
            edge.start()
        began, call = time.perf_counter(), 0
        while call < repeats or time.perf_counter() - began < min_window_s:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            if sync is not None:
                sync(out)
            end.record()
            if read_clocks is not None and call in read_at:
                reading = read_clocks()
                if reading is not None:
                    clocks.append(reading)
            end.synchronize()
            samples.append(start.elapsed_time(end))
            if after_each is not None:
                after_each(out)
            call += 1
        for edge in edges:
            edge.stop()
        return for_this_process(summarize(samples, "cuda_events"), clocks=clocks)
    for edge in edges:
        edge.start()
    began = time.perf_counter()
    while len(samples) < repeats or time.perf_counter() - began < min_window_s:
        begin = time.perf_counter()
        out = fn()
        _finish(out, cuda, sync)
        samples.append((time.perf_counter() - begin) * 1e3)
        if after_each is not None:
            after_each(out)
    for edge in edges:
        edge.stop()
    return summarize(samples, "perf_counter")


def _finish(out: object, cuda: bool, sync: Optional[Callable[[object], None]]) -> None:
    if sync is not None:
        sync(out)
    if cuda:
        import torch

        torch.cuda.synchronize()


def timed_once(fn: Callable[[], object], cuda: bool, sync: Optional[Callable[[object], None]] = None) -> tuple[object, float]:
    """Wall time in seconds of one call, including everything it waits for (compile, first run)."""
    begin = time.perf_counter()
    out = fn()
    _finish(out, cuda, sync)
    return out, time.perf_counter() - begin


class NvmlMemorySampler:
    """Peak device memory in use as NVML sees it, sampled in a thread: counts what TensorRT, XLA and ONNX Runtime
    allocate outside torch's allocator. The figure is the rise over the level when sampling began."""

    def __init__(self, device_uuid: str, interval_s: float = 0.01):
        self._device_uuid = device_uuid
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.paused = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._baseline = 0
        self._peak = 0
        self._handle = None

    def start(self) -> bool:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(self._device_uuid)
            self._baseline = self._peak = pynvml.nvmlDeviceGetMemoryInfo(self._handle).used
        except Exception:  # NVML missing or unusable: the torch allocator's peak is all we report
            return False
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return True

    def _sample(self) -> None:
        import pynvml

        while not self._stop.is_set():
            if not self.paused.is_set():
                self._peak = max(self._peak, pynvml.nvmlDeviceGetMemoryInfo(self._handle).used)
            self._stop.wait(self._interval_s)

    def stop(self) -> Optional[int]:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        return self._peak - self._baseline


class PeakMemory:
    """After a peak_memory block: torch's allocator peak and NVML's peak rise, in bytes (None off a GPU)."""

    def __init__(self, sampler: Optional["NvmlMemorySampler"] = None):
        self.torch: Optional[int] = None
        self.nvml: Optional[int] = None
        self._sampler = sampler
        self._torch_before_set_aside = 0

    @contextmanager
    def set_aside(self) -> Iterator[None]:
        """Memory used inside this block (the check's fp32 reference) counts in neither figure; whatever it allocated
        must be freed (and the caching allocator emptied) by its end."""
        if self._sampler is None:
            yield
            return
        import torch

        self._torch_before_set_aside = max(self._torch_before_set_aside, torch.cuda.max_memory_allocated())
        self._sampler.paused.set()
        try:
            yield
        finally:
            torch.cuda.reset_peak_memory_stats()
            self._sampler.paused.clear()


@contextmanager
def peak_memory(cuda: bool) -> Iterator[PeakMemory]:
    """Yields the PeakMemory that holds, after the block, torch's allocator peak and NVML's peak rise."""
    if not cuda:
        yield PeakMemory()
        return
    import torch

    torch.cuda.reset_peak_memory_stats()
    sampler = NvmlMemorySampler(f"GPU-{torch.cuda.get_device_properties(torch.cuda.current_device()).uuid}")
    sampler.start()
    figures = PeakMemory(sampler)
    try:
        yield figures
    finally:
        figures.nvml = sampler.stop()
        figures.torch = max(figures._torch_before_set_aside, torch.cuda.max_memory_allocated())
