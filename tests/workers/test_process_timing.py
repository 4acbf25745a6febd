"""What each worker process records beside its timed calls (ProcessTiming): its own correctness check, the prefill and
per-step time of an LLM's timed calls, the device time of a synthetic call, clocks read during the timed calls, the
host and GPU it ran on."""

import socket
import time

import pytest
import torch

from mlcbench.schema import Clocks, GpuInfo, JobSpec, Metrics
from mlcbench.workers import runner
from mlcbench.workers.measurement import device_time, timing
from mlcbench.workers.runner import run_job


def test_a_synthetic_cell_on_the_cpu_has_no_device_time_and_no_clocks(tmp_path):
    result = run_job(JobSpec(model="ffn-small", workflow="torch_compile", precision="fp32", batch_size=2,
                             device="cpu", warmup=1, repeats=3), tmp_path)
    assert result.status == "ok", result.error
    (process,) = result.metrics.latency.processes
    assert process.device_samples_ms == [] and process.device_method is None  # no GPU: nothing to time apart
    assert process.clocks == []
    # no counter on a CPU: no energy figure, the reason and the method stored
    assert process.energy.joules is None and process.energy.reason == "a CPU run: no GPU energy counter"
    assert process.energy.method == "nvml_energy_counter_timed_window" and process.energy.calls == 3
    assert process.correctness == result.correctness and result.correctness.method == "outputs"
    assert "cuda_graph_capture" not in result.metrics.settings


def test_an_llm_process_times_its_prefill_as_its_calls_and_derives_the_step_from_them(tmp_path):
    result = run_job(JobSpec(model="llama-2layer", workflow="eager", precision="fp32", batch_size=2, output_len=6,
                             device="cpu", warmup=1, repeats=3), tmp_path)
    assert result.status == "ok", result.error
    latency = result.metrics.latency
    (process,) = latency.processes
    assert 0 < process.prefill_ms < latency.median_ms
    assert process.step_ms == pytest.approx((latency.median_ms - process.prefill_ms) / 5)
    assert process.clocks == [] and process.correctness is None  # eager is the reference: nothing to check


def test_a_process_records_the_host_and_the_gpu_it_ran_on(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "gpu_info", lambda: GpuInfo(name="NVIDIA H200", uuid="GPU-here", index=0))
    monkeypatch.setattr(runner, "read_clocks", lambda uuid, at: None)
    monkeypatch.setattr(runner, "_run", lambda job, cache_dir, gate: runner.Outcome(
        "ok", metrics=Metrics(latency=timing.summarize([1.0, 1.1], "cuda_events")), timed_from=time.time()))
    result = run_job(JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=1, device="cuda",
                             warmup=0, repeats=2), tmp_path)
    (process,) = result.metrics.latency.processes
    assert (process.host, process.gpu_uuid) == (socket.gethostname(), "GPU-here")
    assert process.host == result.provenance.hostname


class _FakeEvent:
    """torch.cuda.Event on a CPU: logs record/synchronize, elapsed time 1 ms."""
    log: list[str] = []

    def __init__(self, enable_timing=False):
        pass

    def record(self):
        self.log.append("record")

    def synchronize(self):
        self.log.append("synchronize")

    def elapsed_time(self, other):
        return 1.0


@pytest.mark.parametrize("repeats,readings", [(3, 3), (50, 10)])
def test_clocks_are_read_inside_the_timed_calls_after_the_end_event_is_queued(monkeypatch, repeats, readings):
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    _FakeEvent.log = []

    def read():
        _FakeEvent.log.append("clocks")
        return Clocks(at="during", sm_mhz=1980, reasons=["sw_power_cap"] if len(_FakeEvent.log) > 10 else [])

    result = timing.time_calls(lambda: None, 0, repeats, cuda=True, read_clocks=read)
    (process,) = result.processes
    assert len(process.clocks) == readings and all(reading.at == "during" for reading in process.clocks)
    assert process.clocks[-1].throttled and not process.clocks[0].throttled
    calls = " ".join(_FakeEvent.log).split("synchronize")
    with_clocks = [call for call in calls if "clocks" in call]
    # first and last call each carry a reading, taken between the end event's record and its synchronize
    assert "clocks" in calls[0] and "clocks" in calls[repeats - 1] and len(with_clocks) == readings
    assert all(call.split() == ["record", "record", "clocks"] for call in with_clocks)


@pytest.mark.parametrize("cuda", [True, False])
def test_each_timed_calls_output_is_handed_over_after_its_timed_interval_and_warm_ups_are_not(monkeypatch, cuda):
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: _FakeEvent.log.append("synchronize all"))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: _FakeEvent.log.append("clock") or 0.0)
    _FakeEvent.log = []
    calls = iter(range(5))

    def call():
        number = next(calls)
        _FakeEvent.log.append(f"call {number}")
        return number
    timing.time_calls(call, 2, 3, cuda=cuda, after_each=lambda output: _FakeEvent.log.append(f"kept {output}"))
    kept = [entry for entry in _FakeEvent.log if entry.startswith("kept")]
    assert kept == ["kept 2", "kept 3", "kept 4"]  # the timed calls', in order; none of the warm-up's
    for number in (2, 3, 4):  # after the call's interval closed: its end event synchronised, its clock read
        before = _FakeEvent.log[_FakeEvent.log.index(f"call {number}"):_FakeEvent.log.index(f"kept {number}")]
        assert before[-1] == ("synchronize" if cuda else "clock"), before


def test_device_time_falls_back_to_the_profiler_and_says_why(monkeypatch):
    def refuse(fn, repeats):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(device_time, "graph_replay_times", refuse)
    monkeypatch.setattr(device_time, "profiled_device_times", lambda fn, calls, sync=None: [0.5] * calls)
    settings = {}
    samples, method = device_time.device_times(lambda: None, 50, None, settings)
    assert method == "profiler_kernels" and samples == [0.5] * device_time.PROFILED_CALLS
    assert "failed: RuntimeError: operation not permitted" in settings["cuda_graph_capture"]


def test_device_time_of_calls_outside_torchs_stream_is_profiled_without_trying_capture(monkeypatch):
    monkeypatch.setattr(device_time, "graph_replay_times", lambda fn, repeats: pytest.fail("capture tried"))
    monkeypatch.setattr(device_time, "profiled_device_times", lambda fn, calls, sync=None: [0.2] * calls)
    settings = {}
    samples, method = device_time.device_times(lambda: None, 5, lambda out: None, settings)
    assert (samples, method) == ([0.2] * 5, "profiler_kernels")
    assert settings["cuda_graph_capture"].startswith("not tried")


@pytest.mark.parametrize("profiled", [[0.3, 0.0], "raise"])
def test_device_time_left_empty_with_a_reason_where_neither_way_works(monkeypatch, profiled):
    def profile(fn, calls, sync=None):
        if profiled == "raise":
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
        return profiled

    monkeypatch.setattr(device_time, "profiled_device_times", profile)
    settings = {}
    assert device_time.device_times(lambda: None, 2, lambda out: None, settings) == ([], None)
    assert settings["device_time"]


def test_clocks_during_the_calls_come_from_one_nvml_handle_per_process(monkeypatch):
    import sys
    import types

    from mlcbench.workers.measurement import clocks

    calls = {"init": 0}
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0, nvmlClocksThrottleReasonSwThermalSlowdown=32,
        nvmlInit=lambda: calls.__setitem__("init", calls["init"] + 1),
        nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda handle: 32,
        nvmlDeviceGetClockInfo=lambda handle, clock: 1755 if clock == 0 else 2619,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: 700000,
        nvmlDeviceGetTemperature=lambda handle, sensor: 61,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    clocks.nvml_handle.cache_clear()
    try:
        readings = [clocks.read_clocks("GPU-0", "during") for _ in range(3)]
    finally:
        clocks.nvml_handle.cache_clear()
    assert calls["init"] == 1
    assert readings[0] == Clocks(at="during", sm_mhz=1755, mem_mhz=2619, power_limit_w=700.0, temperature_c=61,
                                 reasons=["sw_thermal"])
    assert readings[0].throttled


def test_each_timed_graph_replay_is_queued_behind_a_spin_so_the_hosts_launch_is_not_timed(monkeypatch):
    """On an idle stream the start event fires at once and the host's launch of the graph is timed with the kernels:
    the spin keeps the GPU busy while the host queues start, replay and end."""
    import contextlib

    import torch

    log = []

    class Graph:
        def replay(self):
            log.append("replay")

        def reset(self):
            pass

    class Event(_FakeEvent):
        def record(self):
            log.append("record")

        def synchronize(self):
            log.append("synchronize")

    class Stream:
        def wait_stream(self, other):
            pass

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", lambda g: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(f"spin {cycles}"))
    samples = device_time.graph_replay_times(lambda: None, 3)
    assert samples == [1.0] * 3
    timed = " ".join(log).split("synchronize")[:-1]
    spun = ["spin", str(device_time.SPIN_CYCLES), "record", "replay", "record"]
    assert [call.split() for call in timed] == [spun] * 3
