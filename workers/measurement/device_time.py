"""The GPU time of one call without the host's launch cost, beside the whole-call time (which includes launches and
the sync): sub-millisecond cells move up to 2x between processes in the whole-call figure. Preferred: the call
captured once as a CUDA graph, each replay timed alone between two CUDA events queued behind a kernel that spins
while the host queues them (the kernels run back to back, and the host's launch of the graph is not timed). Where a
call cannot be captured (it syncs, or runs outside torch's stream: ONNX Runtime, XLA, CUDA graphs of its own), the
summed time of the GPU activities (kernels, copies, sets) the profiler records per call. Measured after the
whole-call timing, so that figure is untouched."""

from typing import Callable, Optional

from mlcbench.schema.results import DeviceMethod, Setting

PROFILED_CALLS = 10  # one profiler session each: a session costs far more than a call
# GPU clock cycles the stream spins before each timed replay (about 0.5 ms at 2 GHz): the host queues the start event,
# the replay and the end event meanwhile. Timed from an idle stream, the start event fired at once and the graph's
# launch by the host (microseconds, more on a busy host) was timed with it: on an H100 one process's samples of a
# 0.135-ms call ran up to 0.270 ms while another sweep used the other half of the host's CPUs.
SPIN_CYCLES = 1_000_000


def device_times(fn: Callable[[], object], repeats: int, sync: Optional[Callable[[object], None]],
                 settings: dict[str, Setting]) -> tuple[list[float], Optional[DeviceMethod]]:
    """Milliseconds per call and how they were measured; ([], None) where neither way works, with the reasons in
    `settings` (cuda_graph_capture, device_time). `sync` (the workflow's, for outputs outside torch's stream) rules
    out capture."""
    if sync is None:
        try:
            return graph_replay_times(fn, repeats), "cuda_graph_replay_queued"
        except Exception as error:  # capture refused (a sync, a CPU op, its own CUDA graphs ...): say why, profile
            settings["cuda_graph_capture"] = _reason("failed", error)
    else:
        settings["cuda_graph_capture"] = "not tried: the calls run outside torch's CUDA stream"
    try:
        samples = profiled_device_times(fn, min(repeats, PROFILED_CALLS), sync)
    except Exception as error:
        settings["device_time"] = _reason("profiler failed", error)
        return [], None
    if not all(samples):
        settings["device_time"] = "the profiler recorded no GPU activity in a call"
        return [], None
    return samples, "profiler_kernels"


def graph_replay_times(fn: Callable[[], object], repeats: int) -> list[float]:
    import torch

    side = torch.cuda.Stream()  # warm-up on a side stream before capture, as torch.cuda.graphs asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    graph.reset()
    return samples


def profiled_device_times(fn: Callable[[], object], calls: int,
                          sync: Optional[Callable[[object], None]] = None) -> list[float]:
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    samples = []
    for _ in range(calls):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            out = fn()
            if sync is not None:
                sync(out)
            torch.cuda.synchronize()
        activity_us = sum(event.time_range.elapsed_us() for event in profiler.events()
                          if event.device_type == DeviceType.CUDA)
        samples.append(activity_us / 1e3)
    return samples


def _reason(what: str, error: Exception) -> str:
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{what}: {type(error).__name__}: {detail}"[:300]
