"""Where decode time goes: per LLM workflow, the per-step time of its timed calls against the time one step needs
just to read its weights and KV cache at the GPU's memory bandwidth."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from mlcbench.orchestrator.fractions import decode_step_bytes, read_time_ms
from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import WorkflowKey, calibration_for, kind_of, workflow_order
from mlcbench.orchestrator.reports.table import Bullets, Section
from mlcbench.schema import GPUS, Calibration, Result


@dataclass(frozen=True)
class DecodeStep:
    batch: int
    # the per-step time of the timed calls ((call - prefill) / (steps - 1), over processes) with its 95 % interval;
    # None for a result stored before it was recorded
    step_ms: Optional[float]
    step_interval: Optional[tuple[float, float]]
    tpot_ms: Optional[float]  # synchronised after every token: TPOT only, never a bound's denominator
    step_bytes: int  # what one decode step must read: weights and KV cache
    bound_ms: float  # step_bytes over the bandwidth

    @property
    def of_bound(self) -> Optional[float]:
        return self.bound_ms / self.step_ms if self.step_ms else None

    def describe(self) -> str:
        tpot = f"TPOT {self.tpot_ms:.2f} ms (synchronised per token)" if self.tpot_ms else "no TPOT"
        if self.step_ms is None:
            return f"b{self.batch} no step time (stored before the timed calls' step time was recorded; {tpot})"
        interval = (f" [{self.step_interval[0]:.2f}–{self.step_interval[1]:.2f}]" if self.step_interval else "")
        return (f"b{self.batch} {self.step_ms:.2f} ms{interval} per step vs {self.bound_ms:.2f} ms to read "
                f"{self.step_bytes / 1e9:.2f} GB ({fmt.of_bound(self.of_bound)} of the bound); {tpot}")


@dataclass(frozen=True)
class DecodeLine(WorkflowKey):
    """Where the decode time of one LLM workflow goes: the per-step time of its timed calls against the time one
    step needs just to read its weights and KV cache at the GPU's memory bandwidth."""

    bandwidth_gbs: float
    bandwidth_source: str
    steps: tuple[DecodeStep, ...]

    def describe(self) -> str:
        where = f"{self.model} {self.workflow} ({self.gpu}, {self.env})"
        if all(step.step_ms is None for step in self.steps):
            tpot = ", ".join(f"b{step.batch} {step.tpot_ms:.2f} ms" for step in self.steps if step.tpot_ms)
            return (f"{where}: no step time (stored before the timed calls' step time was recorded, so no % of the "
                    f"bound); TPOT (synchronised per token) {tpot or 'not recorded'}")
        return (f"{where}: per decode step of the timed calls {', '.join(step.describe() for step in self.steps)}, "
                f"at {self.bandwidth_gbs:,.0f} GB/s ({self.bandwidth_source}); the rest is kernel launches and gaps, "
                f"host time, and kernels slower than memory")


def decode_lines(results: Iterable[Result], calibrations: Sequence[Calibration] = ()) -> list[DecodeLine]:
    """One line per (GPU, env, model, workflow), against the copy bandwidth measured on that GPU where a sweep
    calibrated it, else the catalog's spec."""
    groups: dict[WorkflowKey, list[Result]] = defaultdict(list)
    for result in results:
        latency = result.metrics.latency
        timed = result.metrics.tpot_ms or (latency is not None and latency.step_median_ms)
        if result.status == "ok" and timed and result.job.device == "cuda" and kind_of(result.job) == "llm":
            groups[WorkflowKey.of(result)].append(result)
    lines = []
    for key, members in groups.items():
        peaks = GPUS.get(key.gpu)
        if peaks is None:
            continue
        members.sort(key=lambda r: r.job.batch_size)
        calibration = calibration_for(members[0], calibrations)
        if calibration is not None and calibration.copy_gbs:
            bandwidth = calibration.copy_gbs
            source = f"a device-to-device copy measured there; spec {peaks.bandwidth_gbs:,.0f}"
        else:
            bandwidth, source = peaks.bandwidth_gbs, "catalog spec"
        steps = []
        for result in members:
            step_bytes, latency = decode_step_bytes(result.job), result.metrics.latency
            if step_bytes is None:  # a layout the catalog does not count: no bound to give
                continue
            low, high = (latency.step_ci_low_ms, latency.step_ci_high_ms) if latency else (None, None)
            steps.append(DecodeStep(result.job.batch_size, latency.step_median_ms if latency else None,
                                    (low, high) if low is not None and high is not None else None,
                                    result.metrics.tpot_ms, step_bytes, read_time_ms(step_bytes, bandwidth)))
        if steps:
            lines.append(DecodeLine(key.gpu, key.env, key.model, key.workflow, bandwidth, source, tuple(steps)))
    return sorted(lines, key=lambda line: (line.model, line.gpu, line.env, workflow_order(line.workflow)))


def decode_section(lines: Iterable[DecodeLine]) -> Optional[Section]:
    lines = list(lines)
    if not lines:
        return None
    return Section("Where decode time goes (per-step time of the timed calls against the memory bound)",
                   (Bullets(None, tuple(line.describe() for line in lines)),))
