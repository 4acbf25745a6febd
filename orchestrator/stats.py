"""The statistics of a cell measured in several worker processes, and of a speedup between two cells (host only).

The process is the unit of repetition: the calls inside one process share its state (allocations, kernel choices,
clocks), so their spread understates how far the next process lands (docs/methodology.md). A cell's figure is
the geometric mean of its process medians, and its 95 % interval is Student's t over the logarithms of those medians:
exact for log-normal process medians, and honest with the 3-5 processes a sweep affords, where a bootstrap over
processes covers far less than 95 % (with 3 processes it cannot reach beyond the extreme medians). A speedup's interval
is Welch's t over the same logarithms of both cells.

One program per cell: a process that compiled into an empty cache (cold) may run another program than one that loaded
the compiled graphs from the cache (warm; e.g. without CUDA graphs), so a cell's figure comes from its warm processes,
and the cold ones join it only where a two-sample test on the log process medians finds no difference at ALPHA.
"""

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats

from mlcbench.schema import CompileCost, Correctness, ProcessTiming, Timing
from mlcbench.schema.results import CellEnergy, Estimate

CONFIDENCE = 0.95
# the test that lets a cell's cold processes join its warm series: pooled unless it rejects "same program" at 5 %
ALPHA = 0.05


def _log_medians(processes: Sequence[ProcessTiming]) -> np.ndarray:
    return np.log([float(np.median(process.samples_ms)) for process in processes])


def _t(df: float) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, df))


def _center_and_interval(values: Sequence[float]) -> tuple[float, Optional[float], Optional[float]]:
    """The geometric mean of per-process values and its 95 % interval (t over their logarithms; none for one)."""
    logs = np.log(np.asarray(values, dtype=float))
    center = float(np.exp(logs.mean()))
    if logs.size < 2:
        return center, None, None
    half = _t(logs.size - 1) * float(np.std(logs, ddof=1)) / math.sqrt(logs.size)
    return center, center * math.exp(-half), center * math.exp(half)


def combine(processes: Sequence[ProcessTiming], method: str, target: float) -> Timing:
    """One Timing over every process's calls (whatever their series: see combine_cell); converged when the interval's
    upper end is within `target` (relative) of the figure. Device time and per-step time are combined over the
    processes that carry them, as the calls are."""
    logs = _log_medians(processes)
    calls = np.concatenate([np.asarray(process.samples_ms, dtype=float) for process in processes])
    # pooled within-process spread: one process's outlier call shows, the distance between processes does not
    within = math.sqrt(float(np.mean([np.var(process.samples_ms) for process in processes])))
    center, low, high = _center_and_interval(np.exp(logs))
    between = None
    if len(logs) > 1:
        medians = np.exp(logs)
        between = float(np.std(medians, ddof=1) / medians.mean())
    return Timing(
        median_ms=center, p10_ms=float(np.percentile(calls, 10)), p90_ms=float(np.percentile(calls, 90)),
        mean_ms=float(calls.mean()), cv=within / float(calls.mean()) if calls.mean() > 0 else 0.0, repeats=int(calls.size),
        method=method, processes=list(processes), cv_between=between, ci_low_ms=low, ci_high_ms=high,
        interval="t_log_process_medians" if low is not None else None,
        converged=high is not None and high / center - 1 <= target,
        **_device_time(processes), **_step_time(processes), energy=cell_energy(processes),
    )


def _device_time(processes: Sequence[ProcessTiming]) -> dict:
    """Timing.device_*: over the processes that timed the device with the first such process's method."""
    timed = [process for process in processes if process.device_samples_ms]
    if not timed:
        return {}
    method = timed[0].device_method
    center, low, high = _center_and_interval([float(np.median(process.device_samples_ms)) for process in timed
                                              if process.device_method == method])
    return dict(device_median_ms=center, device_ci_low_ms=low, device_ci_high_ms=high, device_method=method)


def _step_time(processes: Sequence[ProcessTiming]) -> dict:
    steps = [process.step_ms for process in processes if process.step_ms is not None and process.step_ms > 0]
    if not steps:
        return {}
    center, low, high = _center_and_interval(steps)
    return dict(step_median_ms=center, step_ci_low_ms=low, step_ci_high_ms=high)


def _estimate(values: Sequence[float]) -> Optional[Estimate]:
    if not values:
        return None
    center, low, high = _center_and_interval(values)
    return Estimate(value=center, low=low, high=high)


def _mean_estimate(values: Sequence[float]) -> Optional[Estimate]:
    """The arithmetic mean with Student's t (a temperature: its zero is arbitrary, its logarithm meaningless)."""
    if not values:
        return None
    mean = float(np.mean(values))
    if len(values) < 2:
        return Estimate(value=mean)
    half = _t(len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return Estimate(value=mean, low=mean - half, high=mean + half)


def energy_per_call(processes: Sequence[ProcessTiming]) -> list[float]:
    """The joules per timed call of each process whose window gave a figure."""
    return [process.energy.joules_per_call for process in processes  # type: ignore[misc]
            if process.energy is not None and process.energy.joules_per_call]


def cell_energy(processes: Sequence[ProcessTiming]) -> Optional[CellEnergy]:
    """The cell's energy over `processes` (None where none measured it: stored before energy was)."""
    windows = [process.energy for process in processes if process.energy is not None]
    if not windows:
        return None
    figured = [window for window in windows if window.joules]
    return CellEnergy(
        processes=len(figured), joules_per_call=_estimate(energy_per_call(processes)),
        power_w=_estimate([window.mean_power_w for window in figured if window.mean_power_w]),
        temperature_start_c=_mean_estimate([w.temperature_start_c for w in windows if w.temperature_start_c is not None]),
        temperature_end_c=_mean_estimate([w.temperature_end_c for w in windows if w.temperature_end_c is not None]),
        sampled_ratio=_estimate([window.sampled_joules / window.joules for window in figured
                                 if window.sampled_joules]),  # type: ignore[operator]
        reason=None if figured else next((window.reason for window in windows if window.reason),
                                         "no process's window gave a figure"))


def _log_device_medians(processes: Sequence[ProcessTiming]) -> np.ndarray:
    return np.log([float(np.median(process.device_samples_ms)) for process in processes])


def _device_timed(processes: Sequence[ProcessTiming]) -> bool:
    """Every process timed the device, all by one method."""
    return all(process.device_samples_ms for process in processes) \
        and len({process.device_method for process in processes}) == 1


def same_program(cold: Sequence[ProcessTiming], warm: Sequence[ProcessTiming]) -> bool:
    """Whether a two-sample test on the log process medians finds no difference between cold and warm processes at
    ALPHA: Welch's t where both sides have two processes or more; where one side has a single process, Student's t of
    that process against the other side's prediction interval (the other side's variance); with one process a side
    there is no spread to judge by, and the two are not pooled. On the device time where every process has it: the
    program's own time, where the host's launch cost moves a sub-millisecond whole call up to 2x between processes."""
    if _device_timed([*cold, *warm]):
        a, b = _log_device_medians(cold), _log_device_medians(warm)
    else:
        a, b = _log_medians(cold), _log_medians(warm)
    if a.size < 2 and b.size < 2:
        return False
    if a.size >= 2 and b.size >= 2:
        spread = float(np.var(a, ddof=1)) / a.size + float(np.var(b, ddof=1)) / b.size
        if spread == 0:
            return bool(np.isclose(a.mean(), b.mean()))
        p_value = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    else:
        single, sample = (a, b) if a.size == 1 else (b, a)
        spread = float(np.std(sample, ddof=1))
        if spread == 0:
            return bool(np.isclose(single[0], sample.mean()))
        t = (single[0] - sample.mean()) / (spread * math.sqrt(1 + 1 / sample.size))
        p_value = 2 * float(stats.t.sf(abs(t), sample.size - 1))
    return p_value >= ALPHA


def combine_cell(processes: Sequence[ProcessTiming], method: str, target: float) -> Timing:
    """A cell's Timing, one program per figure: its warm processes (those that did not compile into an empty cache),
    with the cold ones where same_program finds no difference ("pooled"), else the cold ones set aside in
    `other_series`; its cold processes where no warm one ran. A cell whose processes compiled nothing has no series."""
    cold = [process for process in processes if process.compile_cache == "cold"]
    warm = [process for process in processes if process.compile_cache != "cold"]
    other: list[ProcessTiming] = []
    if cold and warm:
        if same_program(cold, warm):
            series, figure = "pooled", list(processes)
        else:
            series, figure, other = "warm", warm, cold
    elif cold:
        series, figure = "cold", cold
    else:
        series = "warm" if any(process.compile_cache == "warm" for process in warm) else None
        figure = warm
    return combine(figure, method, target).model_copy(update={"series": series, "other_series": other})


def compile_cost(processes: Sequence[ProcessTiming], cache: str) -> Optional[CompileCost]:
    """What preparing the cell cost in its processes that compiled `cache` ("cold" or "warm")."""
    seconds = [process.compile_s for process in processes
               if process.compile_cache == cache and process.compile_s is not None]
    if not seconds:
        return None
    return CompileCost(median_s=float(np.median(seconds)), min_s=min(seconds), max_s=max(seconds), n=len(seconds))


def combine_checks(checks: Sequence[Correctness]) -> Correctness:
    """A cell's correctness from its processes' own checks: it fails when one process failed; the figures shown are
    the worst process's (a failed one's first): the one nearest its own tolerance (a row's tolerance is anchored on
    eager's error in that process)."""
    failed = [check for check in checks if not check.passed]
    worst = max(failed or checks, key=lambda check: -1.0 if check.rel_l2_error is None or not check.tolerance
                else check.rel_l2_error / check.tolerance)
    # the timed calls' tokens, over every process (each process's own stay in its ProcessTiming)
    timed = {name: sum(getattr(check, name) for check in checks) if all(
        getattr(check, name) is not None for check in checks) else None
        for name in ("timed_tokens", "timed_tokens_compared")}
    return worst.model_copy(update={"passed": not failed, "processes_checked": len(checks),
                                    "processes_failed": len(failed), **timed})


@dataclass(frozen=True)
class Ratio:
    """baseline time / candidate time (> 1: the candidate is faster), with its 95 % interval when both cells have at
    least two processes."""

    value: float
    low: Optional[float] = None
    high: Optional[float] = None

    @property
    def significant(self) -> Optional[bool]:
        """None when there is no interval to judge by."""
        if self.low is None or self.high is None:
            return None
        return not self.low <= 1.0 <= self.high

    @property
    def equal_within(self) -> Optional[float]:
        """Where the interval holds 1.0: the largest difference it leaves open (0.02 = neither is more than 2 %
        faster); None where the difference is significant or there is no interval."""
        if self.significant is not False:
            return None
        return max(1.0 - self.low, self.high - 1.0)  # type: ignore[operator]


def speedup(baseline: Timing, candidate: Timing) -> Ratio:
    value = baseline.median_ms / candidate.median_ms
    if len(baseline.processes) < 2 or len(candidate.processes) < 2:
        return Ratio(value)
    return _welch(value, _log_medians(baseline.processes), _log_medians(candidate.processes))


def _welch(value: float, a: np.ndarray, b: np.ndarray) -> Ratio:
    """`value` (exp of a's mean log less b's) with Welch's t interval over the two sides' logarithms."""
    va, vb = float(np.var(a, ddof=1)) / a.size, float(np.var(b, ddof=1)) / b.size
    if va + vb == 0:
        return Ratio(value, value, value)
    terms = [v * v / (n - 1) for v, n in ((va, a.size), (vb, b.size)) if v > 0]
    df = (va + vb) ** 2 / sum(terms)  # Welch-Satterthwaite
    half = _t(df) * math.sqrt(va + vb)
    return Ratio(value, value * math.exp(-half), value * math.exp(half))


def energy_ratio(first: Timing, second: Timing) -> Optional[Ratio]:
    """second's joules per call / first's, over the processes of each figure that measured it (None where a side
    has none), with Welch's t interval where both have two processes or more."""
    a, b = energy_per_call(first.processes), energy_per_call(second.processes)
    if not a or not b:
        return None
    logs_a, logs_b = np.log(a), np.log(b)
    value = float(np.exp(logs_b.mean() - logs_a.mean()))
    if logs_a.size < 2 or logs_b.size < 2:
        return Ratio(value)
    return _welch(value, logs_b, logs_a)


@dataclass(frozen=True)
class SpreadComparison:
    """How far apart the worker processes of the same cells land on two sides (two sweeps, e.g. two start-up paths):
    a change that makes processes alike makes every interval falsely narrow. Each process's median whole call, on a
    log scale, less its cell's mean on its side, pooled over the cells with enough processes on both sides."""

    cells: int
    # the pooled standard deviation of those log deviations (about the relative spread between processes), with its
    # degrees of freedom (processes less cells)
    first_sd: float
    second_sd: float
    first_df: int
    second_df: int
    # Brown-Forsythe's test (Levene's about the median) that both sides' deviations spread alike
    p_value: float
    # cells whose second side spread less than its first
    narrower_cells: int

    @property
    def ratio(self) -> float:
        return self.second_sd / self.first_sd if self.first_sd else math.inf

    @property
    def ratio_interval(self) -> tuple[float, float]:
        """second_sd / first_sd's 95 % interval, from the F distribution of the two pooled variances."""
        if not self.first_sd:
            return (math.inf, math.inf)
        tail = (1 - CONFIDENCE) / 2
        upper = float(stats.f.ppf(1 - tail, self.second_df, self.first_df))
        lower = float(stats.f.ppf(tail, self.second_df, self.first_df))
        return (self.ratio / math.sqrt(upper), self.ratio / math.sqrt(lower))

    @property
    def verdict(self) -> str:
        if self.p_value >= ALPHA:
            return "no difference"
        return "narrower" if self.second_sd < self.first_sd else "wider"


def spread_comparison(cells: Sequence[tuple[Sequence[ProcessTiming], Sequence[ProcessTiming]]],
                      least: int = 3) -> Optional[SpreadComparison]:
    """The between-process spread of the same cells on two sides; cells: each cell's processes (its figure's series)
    on the first and the second side. Cells with fewer than `least` processes on a side are left out; None where
    none is left."""
    kept = [(_log_medians(a), _log_medians(b)) for a, b in cells if len(a) >= least and len(b) >= least]
    if not kept:
        return None
    sides = [[logs[side] - logs[side].mean() for logs in kept] for side in (0, 1)]
    # scaled so that each cell's mean square is its sample variance: cells of few and many processes weigh alike
    scaled = [np.concatenate([d * math.sqrt(d.size / (d.size - 1)) for d in side]) for side in sides]
    if not scaled[0].any() and not scaled[1].any():
        p_value = 1.0
    else:
        p_value = float(stats.levene(scaled[0], scaled[1], center="median").pvalue)
    dfs = [sum(d.size - 1 for d in side) for side in sides]
    sds = [math.sqrt(sum(float(np.sum(d ** 2)) for d in side) / df) for side, df in zip(sides, dfs)]
    narrower = sum(float(np.std(b, ddof=1)) < float(np.std(a, ddof=1)) for a, b in zip(*sides))
    return SpreadComparison(cells=len(kept), first_sd=sds[0], second_sd=sds[1], first_df=dfs[0], second_df=dfs[1],
                            p_value=p_value, narrower_cells=narrower)
