"""The statistics of a cell measured in several worker processes, and of a speedup between two cells (host only).

The process is the unit of repetition: the calls inside one process share its state (allocations, kernel choices,
clocks), so their spread understates how far the next process lands (reference/facts.md, "Noise"). A cell's figure is
the geometric mean of its process medians, and its 95 % interval is Student's t over the logarithms of those medians:
exact for log-normal process medians, and honest with the 3-5 processes a sweep affords, where a bootstrap over
processes covers far less than 95 % (with 3 processes it cannot reach beyond the extreme medians). A speedup's interval
is Welch's t over the same logarithms of both cells.
"""

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats

from mlcbench.schema import ProcessTiming, Repetition, Timing

CONFIDENCE = 0.95


def _log_medians(processes: Sequence[ProcessTiming]) -> np.ndarray:
    return np.log([float(np.median(process.samples_ms)) for process in processes])


def _t(df: float) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, df))


def combine(processes: Sequence[ProcessTiming], method: str, target: float) -> Timing:
    """One Timing over every process's calls; converged when the interval's upper end is within `target` (relative)
    of the figure."""
    logs = _log_medians(processes)
    calls = np.concatenate([np.asarray(process.samples_ms, dtype=float) for process in processes])
    # pooled within-process spread: one process's outlier call shows, the distance between processes does not
    within = math.sqrt(float(np.mean([np.var(process.samples_ms) for process in processes])))
    center = float(np.exp(logs.mean()))
    low = high = between = None
    if len(logs) > 1:
        half = _t(len(logs) - 1) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
        low, high = center * math.exp(-half), center * math.exp(half)
        medians = np.exp(logs)
        between = float(np.std(medians, ddof=1) / medians.mean())
    return Timing(
        median_ms=center, p10_ms=float(np.percentile(calls, 10)), p90_ms=float(np.percentile(calls, 90)),
        mean_ms=float(calls.mean()), cv=within / float(calls.mean()) if calls.mean() > 0 else 0.0, repeats=int(calls.size),
        method=method, processes=list(processes), cv_between=between, ci_low_ms=low, ci_high_ms=high,
        interval="t_log_process_medians" if low is not None else None,
        converged=high is not None and high / center - 1 <= target,
    )


def wants_another_process(timing: Optional[Timing], repetition: Repetition, spent_s: float) -> bool:
    """The adaptive rule: at least `processes`, then more while the interval is wider than the target, up to
    `max_processes` or `max_s` seconds of the cell's worker time."""
    done = len(timing.processes) if timing else 0
    if done < repetition.processes:
        return True
    if timing is None or timing.converged or done >= repetition.max_processes:
        return False
    return spent_s < repetition.max_s


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


def speedup(baseline: Timing, candidate: Timing) -> Ratio:
    value = baseline.median_ms / candidate.median_ms
    if len(baseline.processes) < 2 or len(candidate.processes) < 2:
        return Ratio(value)
    a, b = _log_medians(baseline.processes), _log_medians(candidate.processes)
    va, vb = float(np.var(a, ddof=1)) / a.size, float(np.var(b, ddof=1)) / b.size
    if va + vb == 0:
        return Ratio(value, value, value)
    terms = [v * v / (n - 1) for v, n in ((va, a.size), (vb, b.size)) if v > 0]
    df = (va + vb) ** 2 / sum(terms)  # Welch-Satterthwaite
    half = _t(df) * math.sqrt(va + vb)
    return Ratio(value, value * math.exp(-half), value * math.exp(half))
