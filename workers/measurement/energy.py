"""The GPU's energy over a process's timed calls: NVML's energy counter (nvmlDeviceGetTotalEnergyConsumption,
millijoules since the driver loaded; Volta and newer) read at the edges of the window the calls are timed in, with the
GPU's temperature there. The counter moves in steps: its update period, measured once per GPU with the calibration
(and kept in the worker's cache folder for the processes after it), must be at most 5 % of the window, else the
process gives no figure and says why. Every process re-checks the period after its window (two intervals of the
counter, a few periods of polling): a period longer than the one kept judges the window and replaces the kept one, and
a counter that does not move there, or over the window, gives no figure. Nor does a mean power above the GPU's power
limit x POWER_LIMIT_MARGIN: a counter that is not the GPU's draw. nvidia-ml-py is imported here only, inside
functions: absent or unusable NVML gives no figure.

POWER_CHECK_ENV=1 also samples nvmlDeviceGetPowerUsage through the window in a thread, to check the counter against
power x time (a study's run only: the thread takes host time from the calls it samples)."""

import json
import os
import threading
import time
from pathlib import Path
from typing import Optional

from mlcbench.schema.results import EnergyWindow
from mlcbench.workers.measurement.clocks import nvml_handle

# the counter's update period may be at most this share of the window (a reading is up to one period stale)
MAX_PERIOD_SHARE = 0.05
POWER_CHECK_ENV = "MLCBENCH_POWER_CHECK"
PERIOD_CHANGES = 5  # intervals between the counter's changes; the period is the longest
PERIOD_TIMEOUT_S = 3.0
POWER_SAMPLE_S = 0.01
# a GPU's timed window lasts at least this long, and this margin over the counter's shortest usable window
MIN_WINDOW_S = 2.0
WINDOW_MARGIN = 1.1
PERIOD_FOLDER = "nvml_energy"  # below the worker's cache folder: each GPU's calibrated update period
RECHECK_CHANGES = 2  # intervals each process measures after its window
# a re-checked period this much longer or shorter than the kept one replaces it (the polling resolves ~1 ms)
PERIOD_DISAGREEMENT = 1.25
# the GPU's draw never exceeds its power limit by more than brief excursions: a mean above this is not its draw
POWER_LIMIT_MARGIN = 1.1


def _reason(what: str, error: Exception) -> str:
    return f"{what}: {type(error).__name__}: {error}"[:300]


def measure_update_period(device_uuid: str, intervals: int = PERIOD_CHANGES,
                          timeout_s: float = PERIOD_TIMEOUT_S) -> tuple[list[float], Optional[str]]:
    """Seconds between successive changes of the GPU's energy counter (`intervals` of them, polled from the first
    change on), or why there are none."""
    try:
        import pynvml

        handle = nvml_handle(device_uuid)
        last = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as error:  # no NVML, or a GPU without the counter (older than Volta)
        return [], _reason("no energy counter", error)
    changes: list[float] = []
    deadline = time.perf_counter() + timeout_s
    while len(changes) <= intervals and time.perf_counter() < deadline:
        value = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        if value != last:
            changes.append(time.perf_counter())
            last = value
        time.sleep(0.0005)
    if len(changes) < 2:
        return [], f"the energy counter changed {len(changes)} time(s) in {timeout_s:g} s"
    return [later - earlier for earlier, later in zip(changes, changes[1:])], None


def _period_file(cache_root: Path, device_uuid: str) -> Path:
    return cache_root / PERIOD_FOLDER / f"{device_uuid}.json"


def remember_update_period(cache_root: Path, device_uuid: str, period_s: float) -> None:
    path = _period_file(cache_root, device_uuid)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"update_period_s": period_s}), encoding="utf-8")
    partial.replace(path)


def update_period(cache_root: Path, device_uuid: str) -> tuple[Optional[float], Optional[str]]:
    """The GPU's calibrated update period; measured here (and kept) where no calibration on this cache left one."""
    try:
        return float(json.loads(_period_file(cache_root, device_uuid).read_text(encoding="utf-8"))["update_period_s"]), None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    intervals, reason = measure_update_period(device_uuid)
    if not intervals:
        return None, reason
    remember_update_period(cache_root, device_uuid, max(intervals))
    return max(intervals), None


class _PowerSampler:
    """nvmlDeviceGetPowerUsage at the window's start, every POWER_SAMPLE_S in a thread, and at its end, integrated
    over the window (trapezoids between the readings' times, the first and last held to the window's edges)."""

    def __init__(self, handle, begin: float):
        self._handle, self._begin = handle, begin
        self._samples = [self._read()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _read(self) -> tuple[float, float]:
        import pynvml

        return time.perf_counter(), pynvml.nvmlDeviceGetPowerUsage(self._handle) / 1000

    def _sample(self) -> None:
        while not self._stop.wait(POWER_SAMPLE_S):
            self._samples.append(self._read())

    def stop(self, end: float) -> tuple[float, int]:
        """The joules the readings integrate to over [begin, end], and how many readings there were."""
        self._stop.set()
        self._thread.join()
        _, last_watts = self._read()
        points = [(self._begin, self._samples[0][1]), *[(min(at, end), watts) for at, watts in self._samples],
                  (end, last_watts)]
        joules = sum((b - a) * (pa + pb) / 2 for (a, pa), (b, pb) in zip(points, points[1:]))
        return joules, len(self._samples) + 1


class EnergyMeter:
    """Reads the counter at start() and stop(), the edges of the timed calls' window; `window` holds the figure, or
    why there is none, after stop(). A re-checked update period that disagrees with the kept one replaces it in
    `cache_root` (None: kept nowhere)."""

    def __init__(self, device_uuid: Optional[str], calls: int, update_period_s: Optional[float] = None,
                 reason: Optional[str] = None, cache_root: Optional[Path] = None):
        self._device_uuid, self._calls, self._period = device_uuid, calls, update_period_s
        self._reason, self._cache_root = reason, cache_root
        self._sampler: Optional[_PowerSampler] = None
        self._power_limit_w: Optional[float] = None
        self.window = EnergyWindow(calls=calls, update_period_s=update_period_s, reason=reason)

    @property
    def min_window_s(self) -> float:
        """How long the timed calls must last for a figure (0 on a CPU: no counter to wait for)."""
        if self._device_uuid is None:
            return 0.0
        return max(MIN_WINDOW_S, WINDOW_MARGIN * (self._period or 0.0) / MAX_PERIOD_SHARE)

    def start(self) -> None:
        if self._reason is not None:
            return
        try:
            import pynvml

            self._handle = nvml_handle(self._device_uuid)
            self._temperature_start = pynvml.nvmlDeviceGetTemperature(self._handle, pynvml.NVML_TEMPERATURE_GPU)
            self._start_mj = pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except Exception as error:
            self._reason = _reason("no energy counter", error)
            return
        self._begin = time.perf_counter()
        try:
            self._power_limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000
        except Exception:  # no limit to read: the figure stands without the bound
            self._power_limit_w = None
        if os.environ.get(POWER_CHECK_ENV) == "1":
            try:
                self._sampler = _PowerSampler(self._handle, self._begin)
            except Exception:  # no power reading: the counter's figure stands, unchecked
                self._sampler = None

    def stop(self) -> None:
        if self._reason is not None:
            self.window = EnergyWindow(calls=self._calls, update_period_s=self._period, reason=self._reason)
            return
        import pynvml

        end = time.perf_counter()
        try:
            end_mj = pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            temperature_end = pynvml.nvmlDeviceGetTemperature(self._handle, pynvml.NVML_TEMPERATURE_GPU)
        except Exception as error:
            self.window = EnergyWindow(calls=self._calls, update_period_s=self._period,
                                       reason=_reason("the energy counter could not be read after the calls", error))
            return
        sampled, samples = self._sampler.stop(end) if self._sampler is not None else (None, 0)
        window_s, joules = end - self._begin, (end_mj - self._start_mj) / 1000
        period, rechecked, reason = self._period, None, None
        if end_mj < self._start_mj:
            reason = "the energy counter went backwards over the window (the driver reloaded?)"
        elif end_mj == self._start_mj:
            reason = f"the energy counter did not move over the window ({window_s:.3g} s): it is not updating"
        elif period is None:
            reason = "the energy counter's update period is unknown"
        else:
            rechecked, reason = self._recheck(period)
            period = max(period, rechecked or 0.0)
        if reason is None and period is not None and period > MAX_PERIOD_SHARE * window_s:
            reason = (f"the timed window ({window_s:.3g} s) is shorter than {1 / MAX_PERIOD_SHARE:g} x the energy "
                      f"counter's update period ({period:.3g} s)")
        limit = self._power_limit_w
        if reason is None and limit and joules / window_s > POWER_LIMIT_MARGIN * limit:
            reason = (f"the mean power over the window ({joules / window_s:.4g} W) is above {POWER_LIMIT_MARGIN:g} x "
                      f"the GPU's power limit ({limit:.4g} W): not the GPU's draw")
        self.window = EnergyWindow(
            joules=joules if reason is None else None, window_s=window_s, calls=self._calls,
            update_period_s=period, rechecked_period_s=rechecked, power_limit_w=limit,
            temperature_start_c=self._temperature_start, temperature_end_c=temperature_end, sampled_joules=sampled,
            power_samples=samples, reason=reason)

    def _recheck(self, kept: float) -> tuple[Optional[float], Optional[str]]:
        """The counter's update period measured again after the window (the longest of RECHECK_CHANGES intervals),
        kept in place of `kept` where they disagree; or why it could not be (the figure is then dropped)."""
        timeout_s = max(0.5, 4 * (RECHECK_CHANGES + 1) * kept)
        intervals, why = measure_update_period(self._device_uuid, RECHECK_CHANGES, timeout_s)
        if not intervals:
            return None, f"re-checked after the window, {why}: it is not updating as calibrated"
        rechecked = max(intervals)
        if self._cache_root is not None and not kept / PERIOD_DISAGREEMENT <= rechecked <= kept * PERIOD_DISAGREEMENT:
            remember_update_period(self._cache_root, self._device_uuid, rechecked)
        return rechecked, None


def energy_meter(cuda: bool, calls: int, cache_root: Path) -> EnergyMeter:
    """The meter of the current CUDA device's timed calls (on a CPU, one that says there is no counter)."""
    if not cuda:
        return EnergyMeter(None, calls, reason="a CPU run: no GPU energy counter")
    import torch

    uuid = f"GPU-{torch.cuda.get_device_properties(torch.cuda.current_device()).uuid}"
    period, reason = update_period(cache_root, uuid)
    return EnergyMeter(uuid, calls, period, reason, cache_root)
