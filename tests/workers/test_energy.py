"""The GPU's energy over the timed calls (measurement/energy.py) on a CPU, with a fake NVML: a counter that rises with
a fake clock in steps of its update period, and the timed calls moving that clock."""

import sys
import types

import pytest
import torch

from mlcbench.schema import GpuInfo
from mlcbench.workers.measurement import calibration, clocks, energy, timing

UUID = "GPU-fake"


class FakeGpu:
    """NVML of one GPU drawing `watts`, whose energy counter shows what it drew up to its last update (every
    `period_s`); every NVML call takes `read_s` of the fake clock, and time.sleep moves it."""

    def __init__(self, watts=400.0, period_s=0.025, read_s=0.0001, power_limit_w=700.0):
        self.now, self.watts, self.period_s, self.read_s = 1000.0, watts, period_s, read_s
        self.power_limit_w = power_limit_w
        self.offset_mj = 5_000_000  # since the driver loaded
        self.frozen_mj = None  # a counter that stopped updating shows this for ever
        self.log: list[str] = []
        self.counter_reads = 0

    def _tick(self):
        self.now += self.read_s

    def energy(self, handle):
        self._tick()
        self.counter_reads += 1
        self.log.append("energy")
        if self.frozen_mj is not None:
            return self.frozen_mj
        updated_at = (self.now // self.period_s) * self.period_s
        return int(self.offset_mj + updated_at * self.watts * 1000)

    def freeze(self):
        self.frozen_mj = self.energy(None)

    def module(self):
        return types.SimpleNamespace(
            NVML_TEMPERATURE_GPU=0,
            nvmlInit=lambda: None,
            nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
            nvmlDeviceGetTotalEnergyConsumption=self.energy,
            nvmlDeviceGetTemperature=lambda handle, sensor: 40 + int(self.now - 1000),
            nvmlDeviceGetPowerUsage=lambda handle: int(self.watts * 1000),
            nvmlDeviceGetEnforcedPowerLimit=lambda handle: int(self.power_limit_w * 1000),
        )

    def time_module(self):
        def sleep(seconds):
            self.now += seconds

        return types.SimpleNamespace(perf_counter=lambda: self.now, sleep=sleep)


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGpu()
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    monkeypatch.setattr(energy, "time", fake.time_module())
    clocks.nvml_handle.cache_clear()
    yield fake
    clocks.nvml_handle.cache_clear()


class _Event:
    def __init__(self, enable_timing=False):
        pass

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


def _timed_on_fake_cuda(monkeypatch, gpu, call_s, warmup, repeats, meter):
    """time_calls' CUDA path with events that do nothing; each call moves the fake clock by call_s."""
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    def call():
        gpu.log.append("call")
        gpu.now += call_s

    return timing.time_calls(call, warmup, repeats, cuda=True, edges=[meter])


def test_the_counter_is_read_just_before_the_first_timed_call_and_just_after_the_last(monkeypatch, gpu):
    meter = energy.EnergyMeter(UUID, 8, update_period_s=gpu.period_s)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.5, 3, 8, meter)
    # warm-up outside the window; after it, only the re-check of the update period polls the counter
    window_edges = ["call"] * 3 + ["energy"] + ["call"] * 8 + ["energy"]
    assert gpu.log[:len(window_edges)] == window_edges and set(gpu.log[len(window_edges):]) == {"energy"}
    window = meter.window
    assert window.reason is None and window.calls == 8 and window.method == "nvml_energy_counter_timed_window"
    assert window.window_s == pytest.approx(4.0, abs=0.01)
    # the GPU drew 400 W over 4 s of calls; the counter is at most one update stale at each edge
    assert window.joules == pytest.approx(1600, abs=400 * gpu.period_s)
    assert window.joules_per_call == pytest.approx(200, rel=0.01)
    assert window.mean_power_w == pytest.approx(400, rel=0.01)
    assert window.temperature_start_c == 40 + 1 and window.temperature_end_c == 40 + 5  # the fake heats 1 °C a second


def test_the_update_period_is_the_longest_interval_between_the_counters_changes(gpu):
    intervals, reason = energy.measure_update_period(UUID)
    assert reason is None and len(intervals) == energy.PERIOD_CHANGES
    assert intervals == pytest.approx([gpu.period_s] * energy.PERIOD_CHANGES, abs=0.001)


def test_the_period_is_measured_once_per_gpu_and_read_back_by_later_processes(gpu, tmp_path):
    period, reason = energy.update_period(tmp_path, UUID)
    assert reason is None and period == pytest.approx(gpu.period_s, abs=0.001)
    reads = gpu.counter_reads
    assert energy.update_period(tmp_path, UUID) == (period, None)
    assert gpu.counter_reads == reads  # the later process polls nothing


def test_the_calibration_stores_the_period_and_leaves_it_for_the_jobs(monkeypatch, gpu, tmp_path):
    monkeypatch.setattr(calibration, "gpu_info", lambda: GpuInfo(name="Fake", uuid=UUID))
    monkeypatch.setattr(calibration, "_copy_timing", lambda *args: (_ for _ in ()).throw(RuntimeError("no CUDA")))
    calibrated = calibration.calibrate("cuda", tmp_path)
    assert calibrated.energy_update_period_s == pytest.approx(gpu.period_s, abs=0.001)
    assert calibrated.energy_update_period_s == max(calibrated.energy_update_intervals_s)
    assert calibrated.energy_counter is None
    reads = gpu.counter_reads
    assert energy.update_period(tmp_path, UUID) == (calibrated.energy_update_period_s, None)
    assert gpu.counter_reads == reads


def test_a_window_shorter_than_twenty_update_periods_gives_no_figure_and_says_so(monkeypatch, gpu):
    gpu.period_s = 0.1
    short = energy.EnergyMeter(UUID, 10, update_period_s=0.1)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.15, 0, 10, short)  # 1.5 s < 20 x 0.1 s
    assert short.window.joules is None and short.window.window_s == pytest.approx(1.5, abs=0.01)
    assert "shorter than 20 x the energy counter's update period (0.1 s)" in short.window.reason
    assert short.window.temperature_end_c is not None  # the temperature stands without the energy
    long = energy.EnergyMeter(UUID, 10, update_period_s=0.1)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.25, 0, 10, long)  # 2.5 s
    assert long.window.reason is None and long.window.joules == pytest.approx(1000, abs=400 * 0.1)


def test_a_counter_that_goes_backwards_drops_the_figure(monkeypatch, gpu):
    meter = energy.EnergyMeter(UUID, 4, update_period_s=gpu.period_s)

    def call():
        gpu.now += 1.0
        gpu.offset_mj = 0  # the driver reloaded: the counter starts again from zero

    monkeypatch.setattr(torch.cuda, "Event", _Event)
    timing.time_calls(call, 0, 4, cuda=True, edges=[meter])
    assert meter.window.joules is None and "went backwards" in meter.window.reason


@pytest.mark.parametrize("nvml", ["missing", "no counter"])
def test_no_counter_gives_no_figure_and_says_why(monkeypatch, tmp_path, nvml):
    if nvml == "missing":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # a container without nvidia-ml-py
    else:
        def not_supported(handle):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")  # a GPU older than Volta

        fake = FakeGpu().module()
        fake.nvmlDeviceGetTotalEnergyConsumption = not_supported
        monkeypatch.setitem(sys.modules, "pynvml", fake)
    clocks.nvml_handle.cache_clear()
    period, reason = energy.update_period(tmp_path, UUID)
    assert period is None and reason.startswith("no energy counter")
    meter = energy.EnergyMeter(UUID, 3, period, reason)
    timing.time_calls(lambda: None, 0, 3, cuda=False, edges=[meter])
    assert meter.window.joules is None and meter.window.reason == reason
    clocks.nvml_handle.cache_clear()


def test_the_power_check_integrates_power_samples_over_the_same_window(monkeypatch, gpu):
    monkeypatch.setenv(energy.POWER_CHECK_ENV, "1")
    meter = energy.EnergyMeter(UUID, 5, update_period_s=gpu.period_s)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.6, 0, 5, meter)
    window = meter.window
    assert window.power_samples >= 2
    assert window.sampled_joules == pytest.approx(400 * window.window_s, rel=1e-6)
    assert window.sampled_joules == pytest.approx(window.joules, rel=0.02)


def test_without_the_power_check_nothing_samples_power(monkeypatch, gpu):
    monkeypatch.delenv(energy.POWER_CHECK_ENV, raising=False)
    meter = energy.EnergyMeter(UUID, 5, update_period_s=gpu.period_s)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.6, 0, 5, meter)
    assert meter.window.sampled_joules is None and meter.window.power_samples == 0


def test_a_job_stores_the_window_of_its_timed_calls_on_its_process(monkeypatch, tmp_path):
    """The measurement passes the meter to the timed calls and stores what it read (on a CPU, with a counter that
    rises with the host's clock)."""
    import time

    from mlcbench.schema import JobSpec
    from mlcbench.workers.measurement import core
    from mlcbench.workers.runner import run_job

    fake = FakeGpu(watts=250.0).module()
    fake.nvmlDeviceGetTotalEnergyConsumption = lambda handle: int(250.0 * 1000 * time.perf_counter())
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    clocks.nvml_handle.cache_clear()
    monkeypatch.setattr(core, "energy_meter", lambda cuda, calls, cache_root: energy.EnergyMeter(UUID, calls, 1e-6))
    result = run_job(JobSpec(model="ffn-small", workflow="eager", precision="fp32", batch_size=2, device="cpu",
                             warmup=1, repeats=20), tmp_path)
    clocks.nvml_handle.cache_clear()
    assert result.status == "ok", result.error
    (process,) = result.metrics.latency.processes
    window = process.energy
    # at least the 20 calls asked for, and as many more as a window long enough for the counter takes
    assert window.reason is None and window.calls == process.timed_calls >= 20
    assert window.window_s >= energy.MIN_WINDOW_S
    assert sum(process.samples_ms) / 1e3 <= window.window_s <= sum(process.samples_ms) / 1e3 + 2.0
    assert window.mean_power_w == pytest.approx(250.0, rel=0.05)


# ---- a counter that stops, a period that changes, a power no GPU draws: no figure, and why ----

def test_a_counter_frozen_after_the_calibration_gives_no_figure_and_says_why(monkeypatch, gpu, tmp_path):
    period, _ = energy.update_period(tmp_path, UUID)  # calibrated while it moved
    gpu.freeze()
    meter = energy.EnergyMeter(UUID, 8, period, cache_root=tmp_path)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.5, 0, 8, meter)
    assert meter.window.joules is None  # not 0 J
    assert meter.window.reason.startswith("the energy counter did not move over the window (4 s)")


def test_a_counter_that_stops_right_after_the_window_gives_no_figure(monkeypatch, gpu, tmp_path):
    """The window's two readings differ, but the counter is not updating as calibrated: the re-check sees it."""
    meter = energy.EnergyMeter(UUID, 8, gpu.period_s, cache_root=tmp_path)

    def call():
        gpu.now += 0.5
        if gpu.log.count("call") == 7:
            gpu.freeze()
        gpu.log.append("call")

    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    timing.time_calls(call, 0, 8, cuda=True, edges=[meter])
    assert meter.window.joules is None
    assert meter.window.reason.startswith("re-checked after the window, the energy counter changed 0 time(s)")


def test_every_process_rechecks_the_period_and_a_longer_one_judges_the_window_and_replaces_the_kept_one(
        monkeypatch, gpu, tmp_path):
    kept, _ = energy.update_period(tmp_path, UUID)
    assert kept == pytest.approx(0.025, abs=0.001)
    gpu.period_s = 0.1  # the driver now updates the counter four times less often
    short = energy.EnergyMeter(UUID, 10, kept, cache_root=tmp_path)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.15, 0, 10, short)  # 1.5 s: 60 x the kept period, 15 x the new one
    window = short.window
    assert window.joules is None and window.rechecked_period_s == pytest.approx(0.1, abs=0.002)
    assert window.update_period_s == window.rechecked_period_s
    assert "shorter than 20 x the energy counter's update period (0.1 s)" in window.reason
    assert energy.update_period(tmp_path, UUID)[0] == window.rechecked_period_s  # the next process starts from it
    long = energy.EnergyMeter(UUID, 10, kept, cache_root=tmp_path)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.25, 0, 10, long)  # 2.5 s
    assert long.window.reason is None and long.window.joules == pytest.approx(1000, abs=400 * 0.1)


def test_a_period_that_agrees_with_the_kept_one_leaves_it_as_it_is(monkeypatch, gpu, tmp_path):
    energy.remember_update_period(tmp_path, UUID, 0.026)
    meter = energy.EnergyMeter(UUID, 8, 0.026, cache_root=tmp_path)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.5, 0, 8, meter)
    assert meter.window.reason is None and meter.window.rechecked_period_s == pytest.approx(0.025, abs=0.001)
    assert meter.window.update_period_s == 0.026 and energy.update_period(tmp_path, UUID)[0] == 0.026


@pytest.mark.parametrize("limit_w,figure", [(300.0, False), (370.0, True)])
def test_a_mean_power_above_the_gpus_power_limit_by_a_tenth_is_dropped_with_the_reason(monkeypatch, gpu, limit_w,
                                                                                        figure):
    gpu.power_limit_w = limit_w  # the fake draws 400 W
    meter = energy.EnergyMeter(UUID, 8, gpu.period_s)
    _timed_on_fake_cuda(monkeypatch, gpu, 0.5, 0, 8, meter)
    assert meter.window.power_limit_w == limit_w
    if figure:
        assert meter.window.reason is None and meter.window.mean_power_w == pytest.approx(400, rel=0.01)
    else:
        assert meter.window.joules is None
        assert "above 1.1 x the GPU's power limit (300 W)" in meter.window.reason


def test_a_cell_whose_processes_gave_no_figure_says_why():
    from mlcbench.orchestrator.stats import cell_energy
    from mlcbench.schema.results import EnergyWindow, ProcessTiming

    def process(window):
        return ProcessTiming(samples_ms=[1.0], energy=window)

    frozen = EnergyWindow(calls=8, joules=None, window_s=4.0, update_period_s=0.025,
                          reason="the energy counter did not move over the window (4 s): it is not updating")
    cell = cell_energy([process(EnergyWindow(calls=8)), process(frozen)])
    assert cell.processes == 0 and cell.joules_per_call is None and cell.reason == frozen.reason
    # stored before a window said why (0 J, no reason): the cell still does
    assert cell_energy([process(EnergyWindow(calls=8, joules=0.0))]).reason == "no process's window gave a figure"
