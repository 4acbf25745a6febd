"""What the reports show, derived from stored Results: pure functions returning typed rows."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Iterable, Literal, Optional, Sequence

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.provenance import decode_step_bytes
from mlcbench.schema import (GPUS, REFERENCE, WORKFLOWS, Calibration, Correctness, JobSpec, ProcessTiming,
                             Result, Timing)

Kind = Literal["llm", "synthetic"]
Axis = Literal["gpu", "env", "store"]
# Most serious first: the status a support-matrix cell takes when its runs disagree.
SEVERITY = ("crashed", "failed", "timeout", "oom", "unsupported", "ok")
# Packages named in provenance lines and tables; the full set stays in the provenance table.
KEY_PACKAGES = ("torch", "transformers", "torch_tensorrt", "tensorrt", "tensorrt_llm", "onnxruntime", "torch_xla",
                "jax")


@dataclass(frozen=True)
class Selection:
    gpus: tuple[str, ...] = ()
    envs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    workflows: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{name} {', '.join(values)}" for name, values in
                 (("gpu", self.gpus), ("env", self.envs), ("model", self.models), ("workflow", self.workflows),
                  ("status", self.statuses)) if values]
        return "; ".join(parts) or "everything"


def load_results(store: Store, selection: Selection) -> list[Result]:
    """The result of each selected cell (the store's rule: its latest ok attempt, else ...)."""
    return store.cells(gpu_tag=selection.gpus or None, env=selection.envs or None, model=selection.models or None,
                       workflow=selection.workflows or None, status=selection.statuses or None)


def load_attempts(store: Store, selection: Selection) -> list[Result]:
    """Every stored attempt of the selected cells (compile cost cold and warm comes from repeated runs of a cell)."""
    return store.history(gpu_tag=selection.gpus or None, env=selection.envs or None, model=selection.models or None,
                         workflow=selection.workflows or None)


def gpu_of(result: Result) -> str:
    return result.provenance.gpu_tag or "?"


def env_of(result: Result) -> str:
    return result.provenance.env or "?"


def kind_of(job: JobSpec) -> Kind:
    return job.info.kind  # type: ignore[return-value]


def workflow_order(workflow: str) -> tuple[int, str]:
    """Catalog order (eager first), unknown names after, alphabetically."""
    names = list(WORKFLOWS)
    return (names.index(workflow) if workflow in names else len(names), workflow)


def peak_tflops(gpu: str, precision: str, accumulation: Optional[str]) -> Optional[float]:
    peaks = GPUS.get(gpu)
    return peaks.peak_tflops(precision, accumulation or "fp32") if peaks else None


def provenance_line(result: Result) -> str:
    """Where one number comes from, in one line (HTML title attributes, footnotes)."""
    provenance = result.provenance
    gpu = provenance.gpu
    packages = " ".join(f"{name} {provenance.packages[name]}" for name in KEY_PACKAGES if name in provenance.packages)
    parts = [
        f"env {env_of(result)}",
        f"image {provenance.image_digest or 'none (local)'}",
        f"GPU {gpu.name if gpu else gpu_of(result)}" + (f" driver {gpu.driver}" if gpu and gpu.driver else ""),
        packages or "no package versions",
        f"git {provenance.git_rev or 'unknown'}",
        f"run {provenance.started_at:%Y-%m-%d %H:%M} UTC" if provenance.started_at else "run time unknown",
        f"job {result.job_id}",
    ]
    return " · ".join(parts)


def settings_label(job: JobSpec) -> str:
    """The settings that make a cell (besides model, workflow, precision, batch), in words."""
    repetition = job.repetition
    processes = (f"{repetition.processes}" if repetition.processes == repetition.max_processes
                 else f"{repetition.processes}-{repetition.max_processes}")
    lengths = f"{job.input_len} in / {job.output_len} out, " if kind_of(job) == "llm" else ""
    options = job.options.non_default()
    return (f"{lengths}{job.warmup} warm-up + {job.repeats} calls x {processes} process(es), "
            + (f"options {options}, " if options else "") + f"cell {job.cell_settings}")


def not_compiled(result: Result) -> bool:
    """A torch.compile workflow that compiled nothing runs eager code: it gets no speedup claim. (ONNX Runtime, XLA
    through torchax and AOT workflows compile outside dynamo, so its graph count says nothing of them.)"""
    info = WORKFLOWS.get(result.job.workflow)
    return info is not None and info.dynamo and result.metrics.applied.compiled_graphs == 0


# The rules that decide what a report may call a finding, in one place (the report texts quote them from here).
# ⚠ marks a figure whose 95 % interval reaches further than this from it (relative), on either side.
WIDE_INTERVAL = 0.05
# A verdict (a speedup that P3 counts, "fastest") needs this many worker processes on each side and a passed check.
VERDICT_PROCESSES = 3
# Below this whole-call time the GPU time of one call decides where both sides have it: the host's launch cost moves
# a sub-millisecond call up to 2x between processes (reference/facts.md), the device time far less.
DEVICE_TIME_BELOW_MS = 1.0
RULES = (f"⚠: the figure's 95 % interval reaches more than ±{100 * WIDE_INTERVAL:g} % from it, a process was "
         f"lost, the GPU throttled during the timed calls (NVML, read while they ran), or a figure came out over "
         f"100 % of a bound (then the bound or the timing is wrong). A verdict (a speedup P3 counts, \"fastest\") needs "
         f"≥ {VERDICT_PROCESSES} worker processes on each side and a passed correctness check: cells with fewer show "
         f"\"n=1\" / \"n=2, no verdict\", a cell that failed its check gets no speedup. Cells under "
         f"{DEVICE_TIME_BELOW_MS:g} ms are judged on device time (the GPU time of one call without the host's launch "
         f"cost) where both sides have it, and say so.")

FigureName = Literal["whole call", "device time"]


def processes_of(result: Result) -> int:
    """The worker processes behind a result's figure (a Timing stored as one worker reported it is one process)."""
    latency = result.metrics.latency
    return 0 if latency is None else len(latency.processes) or 1


def check_failed(result: Result) -> bool:
    return result.correctness is not None and not result.correctness.passed


def throttled_during(result: Result) -> bool:
    """A slowdown NVML reported while the timed calls ran (readings before or after them say nothing of the calls)."""
    latency = result.metrics.latency
    return latency is not None and any(reading.throttled for process in latency.processes
                                       for reading in process.clocks if reading.at == "during")


def device_timing(latency: Timing) -> Optional[Timing]:
    """The GPU time of one call as a Timing of its own (figure, interval, process medians), for the statistics that
    compare two cells; None where the cell has none."""
    processes = [ProcessTiming(samples_ms=p.device_samples_ms) for p in latency.processes
                 if p.device_samples_ms and p.device_method == latency.device_method]
    if latency.device_median_ms is None or not processes:
        return None
    return latency.model_copy(update={"median_ms": latency.device_median_ms, "processes": processes,
                                      "ci_low_ms": latency.device_ci_low_ms, "ci_high_ms": latency.device_ci_high_ms})


def deciding_timing(latency: Timing) -> tuple[Timing, FigureName]:
    """The figure one cell is judged on: device time under DEVICE_TIME_BELOW_MS where it has one."""
    device = device_timing(latency) if latency.median_ms < DEVICE_TIME_BELOW_MS else None
    return (device, "device time") if device is not None else (latency, "whole call")


def time_ratio(baseline: Timing, candidate: Timing) -> tuple[stats.Ratio, FigureName]:
    """baseline / candidate time with its interval, on device time where either is under DEVICE_TIME_BELOW_MS and
    both have it (the figure that discriminates), else on the whole call."""
    if min(baseline.median_ms, candidate.median_ms) < DEVICE_TIME_BELOW_MS:
        a, b = device_timing(baseline), device_timing(candidate)
        if a is not None and b is not None:
            return stats.speedup(a, b), "device time"
    return stats.speedup(baseline, candidate), "whole call"


def interval_reach(timing: Timing) -> Optional[tuple[float, float]]:
    """How far the 95 % interval reaches below and above the figure (relative, both positive)."""
    if timing.ci_low_ms is None or timing.ci_high_ms is None or timing.median_ms <= 0:
        return None
    return 1 - timing.ci_low_ms / timing.median_ms, timing.ci_high_ms / timing.median_ms - 1


def wide(timing: Timing) -> Optional[tuple[float, float]]:
    """The interval's reach below and above the figure where it is wider than WIDE_INTERVAL (else None)."""
    reach = interval_reach(timing)
    return reach if reach is not None and max(reach) > WIDE_INTERVAL else None


def no_verdict(result: Result) -> Optional[str]:
    """Why a result's figure cannot carry a verdict ("n=1", "check failed", ...); None where it can."""
    if result.status != "ok" or _value(result) is None:
        return result.status
    if check_failed(result):
        return "check failed"
    if not_compiled(result):
        return "not compiled"
    processes = processes_of(result)
    if processes < VERDICT_PROCESSES:
        return f"n={processes}"
    if result.job.workflow != REFERENCE and result.correctness is None:
        return "not checked"
    return None


def ratio_label(ratio: stats.Ratio) -> str:
    """'2.00× [1.90–2.10]', '≈ (not significant)' where the interval holds 1.0, '2.00× (no interval)'."""
    if ratio.significant is False:
        return "≈ (not significant)"
    if ratio.significant is None:
        return f"{ratio.value:.2f}× (no interval)"
    return f"{ratio.value:.2f}× [{ratio.low:.2f}–{ratio.high:.2f}]"


@dataclass(frozen=True)
class Speedup:
    """Baseline (eager) time / this result's time, with its 95 % interval (orchestrator/stats.py)."""

    ratio: stats.Ratio
    # the baseline's sweep when it is not this result's own (no eager run in the same sweep)
    baseline_sweep: Optional[str] = None
    figure: FigureName = "whole call"
    # why either side cannot carry a verdict (None: both can)
    baseline_no_verdict: Optional[str] = None
    candidate_no_verdict: Optional[str] = None
    # judged on device time: what the whole calls say (shown beside, so a reader sees what device time separated)
    whole_call: Optional[stats.Ratio] = None

    @property
    def value(self) -> float:
        return self.ratio.value

    @property
    def significant(self) -> Optional[bool]:
        return self.ratio.significant

    @property
    def verdict(self) -> bool:
        return self.baseline_no_verdict is None and self.candidate_no_verdict is None

    @property
    def claimed(self) -> float:
        """What a summary may count: 1.0 where the interval cannot tell the two apart."""
        return 1.0 if self.significant is False else self.value

    def label(self) -> str:
        text = ratio_label(self.ratio)
        if self.figure == "device time":
            text += " on device time" + (f"; whole call {ratio_label(self.whole_call)}" if self.whole_call else "")
        if self.baseline_sweep:
            text += f" vs eager of sweep {self.baseline_sweep}"
        # the candidate's own evidence is shown beside its figure; the baseline's only here
        return text + (f", eager {self.baseline_no_verdict}: no verdict" if self.baseline_no_verdict else "")


@dataclass(frozen=True)
class PerfRow:
    """One stored result with its figure of merit (tokens/s for LLMs, TFLOPS for synthetic models), its 95 % interval,
    and the speedup over eager for the same model, batch, precision, settings, env and GPU."""

    gpu: str
    env: str
    model: str
    workflow: str
    precision: str
    batch: int
    kind: Kind
    status: str
    reason: Optional[str]
    value: Optional[float]
    speedup: Optional[Speedup]
    efficiency: Optional[float]  # of the catalog's spec: synthetic, of peak TFLOPS; LLM, of the decode bandwidth bound
    accumulation: Optional[str]
    correct: Optional[bool]
    result: Result
    # the same against what the sweep measured on that GPU: the copy bandwidth (LLM), the matmul rate (synthetic)
    measured_efficiency: Optional[float] = None

    @property
    def unit(self) -> str:
        return "tok/s" if self.kind == "llm" else "TFLOPS"

    @property
    def settings(self) -> str:
        return self.result.job.cell_settings

    @property
    def not_compiled(self) -> bool:
        return not_compiled(self.result)

    @property
    def processes(self) -> int:
        return processes_of(self.result)

    @property
    def series(self) -> Optional[str]:
        """Which processes the figure combines: warm, cold (no warm process ran) or pooled (None: stored before)."""
        latency = self.result.metrics.latency
        return latency.series if latency else None

    @property
    def no_verdict(self) -> Optional[str]:
        return no_verdict(self.result)

    @property
    def check_failed(self) -> bool:
        return check_failed(self.result)

    @property
    def step_time_missing(self) -> bool:
        """An LLM cell on a GPU stored before the timed calls' per-step time was: no % of the decode bound."""
        latency = self.result.metrics.latency
        return (self.kind == "llm" and self.value is not None and self.result.job.device == "cuda"
                and latency is not None and latency.step_median_ms is None)

    def _scaled(self, time_ms: float) -> Optional[float]:
        """The figure at another time of the same call (a figure is inversely proportional to its time)."""
        latency = self.result.metrics.latency
        return None if self.value is None or latency is None else self.value * latency.median_ms / time_ms

    @property
    def interval(self) -> Optional[tuple[float, float]]:
        """The value's 95 % interval."""
        latency = self.result.metrics.latency
        if self.value is None or latency is None or latency.ci_low_ms is None or latency.ci_high_ms is None:
            return None
        return self._scaled(latency.ci_high_ms), self._scaled(latency.ci_low_ms)  # type: ignore[return-value]

    @property
    def device(self) -> Optional["DeviceFigure"]:
        """The figure at the GPU time of one call (synthetic cells that measured it)."""
        latency = self.result.metrics.latency
        if self.value is None or latency is None or latency.device_median_ms is None:
            return None
        low, high = latency.device_ci_low_ms, latency.device_ci_high_ms
        return DeviceFigure(
            value=self._scaled(latency.device_median_ms), median_ms=latency.device_median_ms,  # type: ignore[arg-type]
            interval=(self._scaled(high), self._scaled(low)) if low is not None and high is not None else None,
            method=latency.device_method)

    @property
    def set_aside(self) -> Optional["SeriesFigure"]:
        """The cell's other series where a test found it to be another program than the figure's (its cold processes
        beside a warm figure): its own figure, interval and process count."""
        latency = self.result.metrics.latency
        if self.value is None or latency is None or not latency.other_series:
            return None
        other = stats.combine(latency.other_series, latency.method, 0.0)
        interval = ((self._scaled(other.ci_high_ms), self._scaled(other.ci_low_ms))
                    if other.ci_low_ms is not None and other.ci_high_ms is not None else None)
        return SeriesFigure("cold" if latency.series == "warm" else "other", self._scaled(other.median_ms),  # type: ignore
                            interval, len(latency.other_series))  # type: ignore[arg-type]

    @property
    def decided_on(self) -> FigureName:
        latency = self.result.metrics.latency
        return "whole call" if latency is None else deciding_timing(latency)[1]

    def flags(self) -> list[str]:
        """What a reader must know before trusting the figure: only what singles a cell out."""
        latency, found = self.result.metrics.latency, []
        if self.value is None or latency is None:
            return found
        timing, figure = deciding_timing(latency)
        reach = wide(timing)
        if reach is not None:
            found.append(f"{'device-time ' if figure == 'device time' else ''}interval "
                         f"−{100 * reach[0]:.0f}/+{100 * reach[1]:.0f} %")
        if latency.lost_processes:
            found.append(f"{latency.lost_processes} process(es) lost")
        if throttled_during(self.result):
            found.append("throttled")
        if any(f is not None and f > 1 for f in (self.efficiency, self.measured_efficiency)):
            found.append("over 100 % of a bound")
        return found


@dataclass(frozen=True)
class SeriesFigure:
    name: str
    value: float
    interval: Optional[tuple[float, float]]
    processes: int


@dataclass(frozen=True)
class DeviceFigure:
    value: float
    median_ms: float
    interval: Optional[tuple[float, float]]
    method: Optional[str]


def _value(result: Result) -> Optional[float]:
    if result.status != "ok":
        return None
    return result.metrics.tokens_per_s if kind_of(result.job) == "llm" else result.metrics.tflops


def spec_fraction(result: Result) -> Optional[float]:
    """Of the catalog's spec, on a GPU only: synthetic, of peak TFLOPS; LLM, the bytes a decode step reads per
    per-step time of the timed calls against the spec bandwidth (None without a step time)."""
    metrics, job = result.metrics, result.job
    if result.status != "ok" or job.device != "cuda":
        return None
    if kind_of(job) == "llm":
        peaks, latency = GPUS.get(gpu_of(result)), metrics.latency
        if peaks is None or latency is None or not latency.step_median_ms:
            return None
        step_bytes = decode_step_bytes(job)
        if step_bytes is None:  # a layout the catalog does not count: bound unknown
            return None
        return step_bytes / (latency.step_median_ms * 1e-3) / (peaks.bandwidth_gbs * 1e9)
    if metrics.peak_fraction is not None:
        return metrics.peak_fraction
    peak = peak_tflops(gpu_of(result), job.precision, metrics.accumulation)
    return metrics.tflops / peak if metrics.tflops is not None and peak else None


def _baseline_key(result: Result) -> tuple[str, str, str, str, int, str]:
    """Everything but the workflow and its options: the results a speedup may compare."""
    job = result.job
    return (gpu_of(result), env_of(result), job.model, job.precision, job.batch_size, job.baseline_settings)


def _speedup(result: Result, baselines: list[Result]) -> Optional[Speedup]:
    """Against the eager run of the same sweep where there is one, else the latest eager run (named). A result that
    failed its check gets none."""
    latency = result.metrics.latency
    if result.job.workflow == REFERENCE or _value(result) is None or latency is None or not baselines \
            or not_compiled(result) or check_failed(result):
        return None
    same = [b for b in baselines if b.provenance.sweep_id == result.provenance.sweep_id]
    baseline = max(same or baselines,
                   key=lambda b: b.provenance.ended_at.timestamp() if b.provenance.ended_at else 0.0)
    other = None if same else (baseline.provenance.sweep_id or "unknown")
    ratio, figure = time_ratio(baseline.metrics.latency, latency)  # type: ignore[arg-type]
    whole_call = stats.speedup(baseline.metrics.latency, latency) if figure == "device time" else None  # type: ignore
    return Speedup(ratio, baseline_sweep=other, figure=figure, baseline_no_verdict=no_verdict(baseline),
                   candidate_no_verdict=no_verdict(result), whole_call=whole_call)


def calibration_for(result: Result, calibrations: Sequence[Calibration]) -> Optional[Calibration]:
    """The ceiling measured in the result's own sweep on its GPU, else the latest measured on that GPU model."""
    gpu = result.provenance.gpu
    same_model = [c for c in calibrations if c.gpu_tag == gpu_of(result) and c.copy_gbs is not None]
    same_sweep = [c for c in same_model if c.sweep_id == result.provenance.sweep_id
                  and (gpu is None or c.gpu is None or c.gpu.uuid == gpu.uuid)]
    chosen = same_sweep or same_model
    return max(chosen, key=lambda c: c.measured_at.timestamp() if c.measured_at else 0.0) if chosen else None


def _measured_efficiency(result: Result, calibrations: Sequence[Calibration]) -> Optional[float]:
    calibration, metrics = calibration_for(result, calibrations), result.metrics
    if result.status != "ok" or result.job.device != "cuda" or calibration is None:
        return None
    if kind_of(result.job) == "llm":
        peaks, of_spec = GPUS.get(gpu_of(result)), spec_fraction(result)
        if of_spec is None or peaks is None or not calibration.copy_gbs:
            return None
        return of_spec * peaks.bandwidth_gbs / calibration.copy_gbs
    measured = calibration.gemm_tflops.get(result.job.precision)
    return metrics.tflops / measured if metrics.tflops is not None and measured else None


def perf_rows(results: Iterable[Result], calibrations: Sequence[Calibration] = ()) -> list[PerfRow]:
    results = list(results)
    eager: dict[tuple, list[Result]] = defaultdict(list)
    for result in results:
        if result.job.workflow == REFERENCE and _value(result) and result.metrics.latency is not None:
            eager[_baseline_key(result)].append(result)
    rows = []
    for result in results:
        job = result.job
        rows.append(PerfRow(
            gpu=gpu_of(result), env=env_of(result), model=job.model, workflow=job.workflow, precision=job.precision,
            batch=job.batch_size, kind=kind_of(job), status=result.status, reason=result.reason,
            value=_value(result), speedup=_speedup(result, eager.get(_baseline_key(result), [])),
            efficiency=spec_fraction(result), accumulation=result.metrics.accumulation,
            correct=result.correctness.passed if result.correctness else None, result=result,
            measured_efficiency=_measured_efficiency(result, calibrations)))
    return sorted(rows, key=lambda r: (r.kind, r.model, r.gpu, r.env, r.settings, workflow_order(r.workflow),
                                       r.precision, r.batch))


@dataclass(frozen=True)
class ThroughputLine:
    workflow: str
    cells: dict[int, PerfRow]  # batch size -> result


@dataclass(frozen=True)
class Fastest:
    """Which workflow is fastest at one batch size of a table, judged only among cells that can carry a verdict."""

    batch: int
    workflow: Optional[str]  # None: no verdict, or the two fastest are within noise
    text: str


def fastest(batch: int, rows: Iterable[PerfRow]) -> Fastest:
    rows = list(rows)
    judged = [row for row in rows if row.no_verdict is None]
    skipped = [f"{row.workflow} ({row.no_verdict})" for row in rows if row.value is not None and row.no_verdict]
    tail = f"; not judged: {', '.join(skipped)}" if skipped else ""
    if not judged:
        return Fastest(batch, None, f"b{batch}: no verdict (no cell with ≥ {VERDICT_PROCESSES} processes and a "
                                    f"passed check){tail}")
    # ranked by the figure time_ratio judges them on: device time where every cell has it and one is under a ms
    timings = {id(row): row.result.metrics.latency for row in judged}
    device = {key: device_timing(timing) for key, timing in timings.items()}  # type: ignore[arg-type]
    on_device = (all(timing is not None for timing in device.values())
                 and min(timing.median_ms for timing in timings.values()) < DEVICE_TIME_BELOW_MS)  # type: ignore
    ranked = sorted(judged, key=lambda row: (device if on_device else timings)[id(row)].median_ms)  # type: ignore
    top = ranked[0]
    if len(ranked) == 1:
        return Fastest(batch, top.workflow, f"b{batch}: {top.workflow}, the only cell judged{tail}")
    runner_up = ranked[1]
    ratio, figure = time_ratio(runner_up.result.metrics.latency, top.result.metrics.latency)  # type: ignore[arg-type]
    on = " on device time" if figure == "device time" else ""
    if ratio.significant:
        return Fastest(batch, top.workflow, f"b{batch}: fastest {top.workflow}, {ratio.value:.2f}× "
                                            f"[{ratio.low:.2f}–{ratio.high:.2f}]{on} over {runner_up.workflow}{tail}")
    return Fastest(batch, None, f"b{batch}: no single fastest, {top.workflow} and {runner_up.workflow} are within "
                                f"noise{on}{tail}")


@dataclass(frozen=True)
class ThroughputTable:
    """Workflow x batch size for one model at one precision and one set of settings, in one env on one GPU."""

    kind: Kind
    model: str
    precision: str
    gpu: str
    env: str
    settings: str  # settings_label of the table's cells
    batches: tuple[int, ...]
    lines: tuple[ThroughputLine, ...]
    fastest: tuple[Fastest, ...] = ()  # one per batch size

    @property
    def title(self) -> str:
        unit = "tokens/s" if self.kind == "llm" else "TFLOPS"
        return f"{self.model} ({self.precision}) on {self.gpu}, env {self.env}: {unit}; {self.settings}"


def throughput_tables(rows: Iterable[PerfRow]) -> list[ThroughputTable]:
    """One table per settings too: runs with different settings never share a cell."""
    groups: dict[tuple, list[PerfRow]] = defaultdict(list)
    for row in rows:
        groups[(row.kind, row.model, row.precision, row.gpu, row.env, row.settings)].append(row)
    tables = []
    for (kind, model, precision, gpu, env, _), members in sorted(groups.items()):
        by_workflow: dict[str, dict[int, PerfRow]] = defaultdict(dict)
        for row in members:
            by_workflow[row.workflow][row.batch] = row
        lines = tuple(ThroughputLine(w, by_workflow[w]) for w in sorted(by_workflow, key=workflow_order))
        batches = tuple(sorted({row.batch for row in members}))
        tables.append(ThroughputTable(kind, model, precision, gpu, env, settings_label(members[0].result.job), batches,
                                      lines, tuple(fastest(b, [r for r in members if r.batch == b]) for b in batches)))
    return tables


@dataclass(frozen=True)
class CostRow:
    """Compile time and peak memory of one workflow on one model, over the batch sizes that ran."""

    gpu: str
    env: str
    model: str
    workflow: str
    batches_ok: tuple[int, ...]
    compile_s_median: Optional[float]
    compile_s_max: Optional[float]
    # cold: compiles that found nothing in the caches; warm: that found every graph there (cost_rows: how they are
    # combined), each with the number of processes behind it
    compile_cold_s: Optional[float]
    compile_warm_s: Optional[float]
    load_s_median: Optional[float]
    peak_mem_bytes: Optional[int]
    peak_mem_batch: Optional[int]
    compile_cold_n: int = 0
    compile_warm_n: int = 0


def _ok_by_cell_group(results: Iterable[Result]) -> dict[tuple[str, str, str, str], list[Result]]:
    groups: dict[tuple[str, str, str, str], list[Result]] = defaultdict(list)
    for result in results:
        if result.status == "ok":
            groups[(gpu_of(result), env_of(result), result.job.model, result.job.workflow)].append(result)
    return groups


def _compiles(result: Result) -> list[tuple[float, Optional[str]]]:
    """(compile seconds, Inductor cache state) of each worker process of a result (one, for a single-process one),
    a series set aside included."""
    latency = result.metrics.latency
    processes = [*latency.processes, *latency.other_series] if latency else []
    measured = [(p.compile_s, p.compile_cache) for p in processes if p.compile_s is not None]
    if measured:
        return measured
    return [(result.metrics.compile_s, result.metrics.compile_cache)] if result.metrics.compile_s is not None else []


CompileState = Literal["cold", "warm"]


def compile_costs(result: Result) -> dict[CompileState, tuple[float, int]]:
    """(median seconds, processes) of a result's cold and of its warm compiles: as the host combined them over every
    process of the cell (Metrics.compile_cold / compile_warm, both series), else, for a result stored before, from
    its processes' own compile times."""
    metrics = result.metrics
    combined = {state: (cost.median_s, cost.n)
                for state, cost in (("cold", metrics.compile_cold), ("warm", metrics.compile_warm)) if cost}
    if combined:
        return combined  # type: ignore[return-value]
    by_state: dict[CompileState, list[float]] = defaultdict(list)
    for seconds, cache in _compiles(result):
        if cache in ("cold", "warm"):
            by_state[cache].append(seconds)  # type: ignore[index]
    return {state: (median(seconds), len(seconds)) for state, seconds in by_state.items()}


def cost_rows(results: Iterable[Result], attempts: Optional[Iterable[Result]] = None) -> list[CostRow]:
    """Compile time and memory of each cell's result; the cold and warm compile times over every attempt given (a
    cell's first run compiled cold, its reruns warm, before a cell kept both series): the median over those results
    of each one's median, with the processes behind them."""
    groups = _ok_by_cell_group(results)
    tried = _ok_by_cell_group(results if attempts is None else attempts)
    rows = []
    for (gpu, env, model, workflow), members in groups.items():
        compile_times = [r.metrics.compile_s for r in members if r.metrics.compile_s is not None]
        costs = [compile_costs(r) for r in tried[(gpu, env, model, workflow)]]
        by_cache = {state: [cost[state] for cost in costs if state in cost] for state in ("cold", "warm")}
        load_times = [r.metrics.load_s for r in members if r.metrics.load_s is not None]
        with_memory = [r for r in members if r.metrics.peak_mem_bytes is not None]
        biggest = max(with_memory, key=lambda r: r.metrics.peak_mem_bytes or 0) if with_memory else None
        rows.append(CostRow(
            gpu, env, model, workflow, tuple(sorted(r.job.batch_size for r in members)),
            median(compile_times) if compile_times else None, max(compile_times) if compile_times else None,
            *(median(s for s, _ in by_cache[state]) if by_cache[state] else None for state in ("cold", "warm")),
            median(load_times) if load_times else None,
            biggest.metrics.peak_mem_bytes if biggest else None, biggest.job.batch_size if biggest else None,
            *(sum(n for _, n in by_cache[state]) for state in ("cold", "warm"))))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow)))


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

    def describe(self) -> str:
        tpot = f"TPOT {self.tpot_ms:.2f} ms (synchronised per token)" if self.tpot_ms else "no TPOT"
        if self.step_ms is None:
            return f"b{self.batch} no step time (stored before the timed calls' step time was recorded; {tpot})"
        interval = (f" [{self.step_interval[0]:.2f}–{self.step_interval[1]:.2f}]" if self.step_interval else "")
        return (f"b{self.batch} {self.step_ms:.2f} ms{interval} per step vs {self.bound_ms:.2f} ms to read "
                f"{self.step_bytes / 1e9:.2f} GB ({fmt.of_bound(self.bound_ms / self.step_ms)} of the bound); {tpot}")


@dataclass(frozen=True)
class DecodeLine:
    """Where the decode time of one LLM workflow goes: the per-step time of its timed calls against the time one
    step needs just to read its weights and KV cache at the GPU's memory bandwidth."""

    gpu: str
    env: str
    model: str
    workflow: str
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
    groups: dict[tuple[str, str, str, str], list[Result]] = defaultdict(list)
    for result in results:
        latency = result.metrics.latency
        timed = result.metrics.tpot_ms or (latency is not None and latency.step_median_ms)
        if result.status == "ok" and timed and result.job.device == "cuda" and kind_of(result.job) == "llm":
            groups[(gpu_of(result), env_of(result), result.job.model, result.job.workflow)].append(result)
    lines = []
    for (gpu, env, model, workflow), members in groups.items():
        peaks = GPUS.get(gpu)
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
                                    result.metrics.tpot_ms, step_bytes, step_bytes / (bandwidth * 1e9) * 1e3))
        if steps:
            lines.append(DecodeLine(gpu, env, model, workflow, bandwidth, source, tuple(steps)))
    return sorted(lines, key=lambda line: (line.model, line.gpu, line.env, workflow_order(line.workflow)))


@dataclass(frozen=True)
class SpreadRow:
    """How far a synthetic cell's processes land apart: max / min of their medians, of the whole call and of the
    device time (the GPU time of one call) of the same processes."""

    gpu: str
    env: str
    model: str
    workflow: str
    precision: str
    batch: int
    processes: int
    whole_call: float
    device: Optional[float]  # None where the cell has no device time
    device_method: Optional[str]


def _max_over_min(samples: Iterable[list[float]]) -> Optional[float]:
    medians = [median(calls) for calls in samples if calls]
    return max(medians) / min(medians) if len(medians) > 1 and min(medians) > 0 else None


def spread_rows(results: Iterable[Result]) -> list[SpreadRow]:
    """Synthetic cells measured in two processes or more (their spread is what decides whether device time is the
    figure that discriminates)."""
    rows = []
    for result in results:
        latency, job = result.metrics.latency, result.job
        if result.status != "ok" or latency is None or kind_of(job) != "synthetic":
            continue
        whole_call = _max_over_min(p.samples_ms for p in latency.processes)
        if whole_call is None:
            continue
        device = device_timing(latency)
        rows.append(SpreadRow(gpu_of(result), env_of(result), job.model, job.workflow, job.precision, job.batch_size,
                              len(latency.processes), whole_call,
                              _max_over_min(p.samples_ms for p in device.processes) if device else None,
                              latency.device_method))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.precision, r.batch))


@dataclass(frozen=True)
class NotOk:
    """A run of a support cell that did not end ok."""

    batch: int
    precision: str
    status: str
    reason: str

    @property
    def outcome(self) -> str:
        return f"{self.status}: {self.reason}"

    def __str__(self) -> str:
        return f"b{self.batch} {self.precision} {self.outcome}"


@dataclass(frozen=True)
class SupportCell:
    status: str  # the most serious status among the cell's runs
    counts: tuple[tuple[str, int], ...]  # (status, runs), most serious first
    not_ok: tuple[NotOk, ...]  # every run that did not end ok, by batch size

    @property
    def reasons(self) -> tuple[str, ...]:
        """'b64 fp16 oom: CUDA out of memory ...' for every run that is not ok."""
        return tuple(str(run) for run in self.not_ok)

    @property
    def label(self) -> str:
        if self.counts == (("ok", self.total),):
            return "ok"
        return " · ".join(f"{status} {count}/{self.total}" for status, count in self.counts)

    @property
    def total(self) -> int:
        return sum(count for _, count in self.counts)


@dataclass(frozen=True)
class SupportMatrix:
    """Workflow (rows) x env on GPU (columns) for one model."""

    model: str
    columns: tuple[tuple[str, str], ...]  # (env, gpu)
    workflows: tuple[str, ...]
    cells: dict[tuple[str, str, str], SupportCell]  # (workflow, env, gpu) -> cell

    def cell(self, workflow: str, env: str, gpu: str) -> Optional[SupportCell]:
        return self.cells.get((workflow, env, gpu))


def support_matrices(results: Iterable[Result]) -> list[SupportMatrix]:
    runs: dict[str, dict[tuple[str, str, str], list[Result]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        runs[result.job.model][(result.job.workflow, env_of(result), gpu_of(result))].append(result)
    matrices = []
    for model in sorted(runs):
        cells = {}
        for key, members in runs[model].items():
            counts = {s: sum(1 for r in members if r.status == s) for s in SEVERITY}
            present = tuple((s, n) for s, n in counts.items() if n)
            not_ok = tuple(NotOk(r.job.batch_size, r.job.precision, r.status, r.reason or "no reason recorded")
                           for r in sorted(members, key=lambda r: r.job.batch_size) if r.status != "ok")
            cells[key] = SupportCell(present[0][0], present, not_ok)
        matrices.append(SupportMatrix(
            model=model, columns=tuple(sorted({(env, gpu) for _, env, gpu in cells})),
            workflows=tuple(sorted({workflow for workflow, _, _ in cells}, key=workflow_order)), cells=cells))
    return matrices


@dataclass(frozen=True)
class CheckRow:
    """A correctness check against eager (shown for every checked result; failures are never dropped)."""

    gpu: str
    env: str
    model: str
    workflow: str
    precision: str
    batch: int
    passed: bool
    cosine: Optional[float]
    rel_l2_error: Optional[float]
    max_abs_diff: Optional[float]
    token_agreement: Optional[float]
    tolerance: float
    check: Optional[Correctness] = None

    @property
    def where(self) -> str:
        """How it was checked and where it failed: 'teacher_forced, worst at step 3 of 32 checked, 1 of 5 processes
        failed' (what the result recorded)."""
        check = self.check
        if check is None:
            return "—"
        parts = [check.method or "method not recorded"]
        if check.worst_step is not None:
            parts.append(f"worst at step {check.worst_step}"
                         + (f" of {check.steps_checked} checked" if check.steps_checked is not None else ""))
        elif check.steps_checked is not None:
            parts.append(f"{check.steps_checked} steps checked")
        if check.processes_checked is not None:
            parts.append(f"{check.processes_failed or 0} of {check.processes_checked} processes failed")
        return ", ".join(parts) + (f" ({check.note})" if check.note else "")


def failed_checks(results: Iterable[Result]) -> list[CheckRow]:
    rows = []
    for result in results:
        check = result.correctness
        if check is None or check.passed:
            continue
        job = result.job
        rows.append(CheckRow(gpu_of(result), env_of(result), job.model, job.workflow, job.precision, job.batch_size,
                             check.passed, check.cosine, check.rel_l2_error, check.max_abs_diff, check.token_agreement,
                             check.tolerance, check))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.batch))


@dataclass(frozen=True)
class ProvenanceRow:
    """Where the numbers of one env on one GPU come from. Several values mean the runs differ."""

    gpu: str
    env: str
    results: int
    gpu_names: tuple[str, ...]
    drivers: tuple[str, ...]
    image_digests: tuple[str, ...]
    packages: tuple[tuple[str, tuple[str, ...]], ...]  # (package, versions)
    pythons: tuple[str, ...]
    git_revs: tuple[str, ...]
    first_started: Optional[datetime]
    last_ended: Optional[datetime]


def _distinct(values: Iterable[Optional[str]]) -> tuple[str, ...]:
    return tuple(sorted({value for value in values if value}))


def provenance_rows(results: Iterable[Result]) -> list[ProvenanceRow]:
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for result in results:
        groups[(gpu_of(result), env_of(result))].append(result)
    rows = []
    for (gpu, env), members in sorted(groups.items()):
        provenances = [r.provenance for r in members]
        package_names = sorted({name for p in provenances for name in p.packages},
                               key=lambda n: (KEY_PACKAGES.index(n) if n in KEY_PACKAGES else len(KEY_PACKAGES), n))
        starts = [p.started_at for p in provenances if p.started_at]
        ends = [p.ended_at for p in provenances if p.ended_at]
        rows.append(ProvenanceRow(
            gpu=gpu, env=env, results=len(members),
            gpu_names=_distinct(p.gpu.name if p.gpu else None for p in provenances),
            drivers=_distinct(p.gpu.driver if p.gpu else None for p in provenances),
            image_digests=_distinct(p.image_digest for p in provenances),
            packages=tuple((name, _distinct(p.packages.get(name) for p in provenances)) for name in package_names),
            pythons=_distinct(p.python for p in provenances), git_revs=_distinct(p.git_rev for p in provenances),
            first_started=min(starts) if starts else None, last_ended=max(ends) if ends else None))
    return rows


@dataclass(frozen=True)
class CompareRow:
    """One workflow x model x batch measured on two GPUs (or in two envs); ratio = second / first."""

    workflow: str
    model: str
    precision: str
    batch: int
    fixed: str  # the env when GPUs are compared, the GPU when envs are
    unit: str
    first: Optional[float]
    second: Optional[float]
    first_status: Optional[str]
    second_status: Optional[str]
    # second / first with its 95 % interval (from both sides' process medians); None where a side failed its check
    change: Optional[stats.Ratio] = None
    flags: tuple[str, ...] = ()  # either side's (PerfRow.flags)
    figure: FigureName = "whole call"
    # why a side cannot carry a verdict ("n=1", "check failed", ...), for each side that ran
    first_no_verdict: Optional[str] = None
    second_no_verdict: Optional[str] = None

    @property
    def ratio(self) -> Optional[float]:
        if self.checks_failed:
            return None
        return self.second / self.first if self.first and self.second is not None else None

    @property
    def checks_failed(self) -> bool:
        return "check failed" in (self.first_no_verdict, self.second_no_verdict)

    @property
    def verdict(self) -> bool:
        """Both sides ran with enough processes and passed their checks: a difference here is a finding."""
        return self.ratio is not None and self.first_no_verdict is None and self.second_no_verdict is None

    def label(self) -> str:
        if self.checks_failed:
            return "— (check failed: no ratio)"
        if self.change is None or self.change.significant is None:
            text = "—" if self.ratio is None else f"{self.ratio:.2f}× (no interval)"
        else:
            text = ratio_label(self.change)
        if self.ratio is None:
            return text
        if self.figure == "device time":
            text += " on device time"
        evidence = [why for why in (self.first_no_verdict, self.second_no_verdict) if why]
        return text + (f" ({', '.join(dict.fromkeys(evidence))}, no verdict)" if evidence else "")


@dataclass(frozen=True)
class HostCpu:
    """The CPU a result's worker ran on; None where the result did not record it (stored before it was)."""

    model: Optional[str]
    cpus: Optional[int]

    @property
    def known(self) -> bool:
        return self.model is not None or self.cpus is not None

    def describe(self) -> str:
        if not self.known:
            return "unknown"
        return f"{self.model or 'unknown CPU'}, {'unknown number of' if self.cpus is None else self.cpus} CPUs"


@dataclass(frozen=True)
class SideHosts:
    """The host CPUs one side of a comparison measured its figures on (its results that ran ok)."""

    side: str
    hosts: frozenset[HostCpu]

    def describe(self) -> str:
        if not self.hosts:
            return f"{self.side}: no result ran ok"
        ordered = sorted(self.hosts, key=lambda host: (host.model or "", host.cpus or 0))
        return f"{self.side}: host{'s' if len(ordered) > 1 else ''} " + "; ".join(h.describe() for h in ordered)


@dataclass(frozen=True)
class Comparison:
    axis: Axis
    first: str
    second: str
    rows: tuple[CompareRow, ...]
    hosts: tuple[SideHosts, SideHosts]

    @property
    def hosts_differ(self) -> bool:
        """Both sides recorded their host CPUs, and not the same ones."""
        first, second = (frozenset(host for host in side.hosts if host.known) for side in self.hosts)
        return bool(first) and bool(second) and first != second

    @property
    def title(self) -> str:
        return f"{self.second} / {self.first} ({ {'gpu': 'GPU', 'env': 'env', 'store': 'store'}[self.axis]})"

    @property
    def judged(self) -> int:
        """Rows that can carry a verdict and have an interval to judge by."""
        return sum(1 for row in self.rows if row.verdict and row.change is not None
                   and row.change.significant is not None)

    @property
    def significant(self) -> int:
        """Judged rows whose two sides differ."""
        return sum(1 for row in self.rows if row.verdict and row.change is not None and row.change.significant)

    @property
    def flagged(self) -> int:
        return sum(1 for row in self.rows if row.flags)

    def summary(self) -> str:
        compared = sum(1 for row in self.rows if row.ratio is not None)
        return (f"{compared} of {len(self.rows)} row(s) ran ok on both sides with no failed check; {self.significant} "
                f"of {self.judged} judged (≥ {VERDICT_PROCESSES} processes and a passed check on both sides, with "
                f"intervals) differ significantly (95 % intervals: about 1 in 20 would by chance alone); "
                f"{self.flagged} of {len(self.rows)} row(s) flagged ⚠. {RULES}")


def _change(a: Optional[PerfRow], b: Optional[PerfRow]) -> tuple[Optional[stats.Ratio], FigureName]:
    """b's figure over a's, from the times (a figure is inversely proportional to its time), on the figure that
    discriminates (time_ratio)."""
    if a is None or b is None or a.value is None or b.value is None:
        return None, "whole call"
    first, second = a.result.metrics.latency, b.result.metrics.latency
    return time_ratio(first, second) if first and second else (None, "whole call")


Sides = dict[tuple[str, str, str, int, str, str], dict[str, PerfRow]]


def compare(rows: Iterable[PerfRow], axis: Axis, first: str, second: str) -> Comparison:
    """Two GPUs or two envs of one store; everything else must match, settings included."""
    sides: Sides = defaultdict(dict)
    for row in rows:
        side, fixed = (row.gpu, row.env) if axis == "gpu" else (row.env, row.gpu)
        if side in (first, second):
            sides[(row.workflow, row.model, row.precision, row.batch, fixed, row.settings)][side] = row
    return _comparison(axis, first, second, sides)


def compare_stores(first_rows: Iterable[PerfRow], second_rows: Iterable[PerfRow], first: str,
                   second: str) -> Comparison:
    """The same cells (GPU, env, model, workflow, precision, batch, settings) in two stores: two sweeps."""
    sides: Sides = defaultdict(dict)
    for side, rows in ((first, first_rows), (second, second_rows)):
        for row in rows:
            sides[(row.workflow, row.model, row.precision, row.batch, f"{row.env} @ {row.gpu}", row.settings)][side] = row
    return _comparison("store", first, second, sides)


def _comparison(axis: Axis, first: str, second: str, sides: Sides) -> Comparison:
    compared = []
    hosts: dict[str, set[HostCpu]] = {first: set(), second: set()}
    for (workflow, model, precision, batch, fixed, _), by_side in sides.items():
        a, b = by_side.get(first), by_side.get(second)
        for side, row in by_side.items():
            if row.status == "ok":
                hosts[side].add(HostCpu(row.result.provenance.host_cpu, row.result.provenance.host_cpus))
        change, figure = _change(a, b)
        compared.append(CompareRow(workflow, model, precision, batch, fixed, (a or b).unit,  # type: ignore[union-attr]
                                   a.value if a else None, b.value if b else None,
                                   a.status if a else None, b.status if b else None, change,
                                   tuple(flag for row in (a, b) if row for flag in row.flags()), figure,
                                   a.no_verdict if a and a.value is not None else None,
                                   b.no_verdict if b and b.value is not None else None))
    compared.sort(key=lambda r: (r.model, r.fixed, workflow_order(r.workflow), r.precision, r.batch))
    return Comparison(axis, first, second, tuple(compared),
                      (SideHosts(first, frozenset(hosts[first])), SideHosts(second, frozenset(hosts[second]))))


def comparisons_in(rows: list[PerfRow]) -> list[Comparison]:
    """Every other GPU against the first, every other env against the first: what the HTML report compares when the
    store holds more than one."""
    found = []
    for axis in ("gpu", "env"):
        values = sorted({row.gpu if axis == "gpu" else row.env for row in rows})
        found += [compare(rows, axis, values[0], other) for other in values[1:]]  # type: ignore[arg-type]
    return [comparison for comparison in found if any(r.ratio is not None for r in comparison.rows)]


@dataclass(frozen=True)
class CeilingRow:
    """What the sweep measured on a GPU beside the catalog's spec."""

    gpu: str
    env: str
    sweep: str
    copy_gbs: Optional[float]
    spec_gbs: Optional[float]
    gemm: tuple[tuple[str, float, Optional[float]], ...]  # (precision, measured TFLOPS, spec TFLOPS)
    error: Optional[str]


def ceiling_rows(calibrations: Iterable[Calibration]) -> list[CeilingRow]:
    rows = []
    for calibration in calibrations:
        gpu = calibration.gpu_tag or "?"
        peaks = GPUS.get(gpu)
        rows.append(CeilingRow(
            gpu, calibration.env or "?", calibration.sweep_id or "?", calibration.copy_gbs,
            peaks.bandwidth_gbs if peaks else None,
            tuple((precision, tflops, peaks.peak_tflops(precision) if peaks else None)
                  for precision, tflops in sorted(calibration.gemm_tflops.items())),
            calibration.error.strip().splitlines()[-1] if calibration.error else None))
    return sorted(rows, key=lambda r: (r.gpu, r.sweep))
