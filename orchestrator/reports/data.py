"""What every report section reads its results by, derived from stored Results with pure functions: the coordinates
of a cell, the rules that decide what a figure may claim, and each result's figure with its speedup and bounds
(PerfRow). The sections (reports/sections/) build their own rows and tables from these."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Literal, Optional, Sequence

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.fractions import decode_step_bytes, of_decode_bound, of_peak, peak_tflops
from mlcbench.schema import GPUS, REFERENCE, WORKFLOWS, Calibration, JobSpec, ProcessTiming, Result, Timing
from mlcbench.schema.results import TIMED_TOKENS_CHECKED, CellEnergy, Estimate

Kind = Literal["llm", "synthetic"]
# Packages named in provenance lines and tables; the full set stays in the provenance table.
KEY_PACKAGES = ("torch", "transformers", "torch_tensorrt", "tensorrt", "tensorrt_llm", "onnxruntime", "torch_xla",
                "jax")


def gpu_of(result: Result) -> str:
    return result.provenance.gpu_tag or "?"


def env_of(result: Result) -> str:
    return result.provenance.env or "?"


def kind_of(job: JobSpec) -> Kind:
    return job.info.kind  # type: ignore[return-value]


def workflow_order(workflow: str) -> tuple[bool, int, str]:
    """Catalog order (eager first), unknown names after, alphabetically; hand-written reference rows after all."""
    names = list(WORKFLOWS)
    return (hand_written(workflow), names.index(workflow) if workflow in names else len(names), workflow)


def hand_written(workflow: str) -> bool:
    """A reference row of mlcbench's own kernels (the catalog's hand_written): shown apart, never ranked with the
    compilers (P3, "fastest")."""
    info = WORKFLOWS.get(workflow)
    return info is not None and info.hand_written


@dataclass(frozen=True)
class WorkflowKey:
    """One workflow on one model, in one env on one GPU: what a compile-cost or decode line is about."""

    gpu: str
    env: str
    model: str
    workflow: str

    @classmethod
    def of(cls, result: Result) -> "WorkflowKey":
        return WorkflowKey(gpu_of(result), env_of(result), result.job.model, result.job.workflow)


@dataclass(frozen=True)
class CellKey(WorkflowKey):
    """A cell: one result per (GPU, env, model, workflow, precision, batch, settings); a row about one cell is keyed
    by it (its fields come first)."""

    precision: str
    batch: int
    settings: str  # JobSpec.cell_settings: runs whose settings differ are different cells

    @classmethod
    def of(cls, result: Result) -> "CellKey":
        job = result.job
        return CellKey(gpu_of(result), env_of(result), job.model, job.workflow, job.precision, job.batch_size,
                       job.cell_settings)


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
    retired = job.retired_repetition  # an older store's cap on the processes (schema/legacy.py)
    processes = f"{job.repetition.processes}" + (
        f"-{retired.max_processes}" if retired and retired.max_processes != job.repetition.processes else "")
    lengths = f"{job.input_len} in / {job.output_len} out, " if kind_of(job) == "llm" else ""
    options = job.options.non_default()
    return (f"{lengths}{job.warmup} warm-up + {job.repeats} calls x {processes} process(es), "
            + (f"options {options}, " if options else "") + (f"weights {job.model_path}, " if job.model_path else "")
            + f"cell {job.cell_settings}")


def not_compiled(result: Result) -> bool:
    """A compiling workflow that ran eager code gets no speedup claim: a torch.compile workflow that compiled no graph,
    or a synthetic cell whose call after the timed ones ran eager's own ops in eager's order (compiled_code_ran: no
    dynamo graph, TorchScript graph, ONNX Runtime or XLA program ran)."""
    info = WORKFLOWS.get(result.job.workflow)
    return info is not None and ((info.dynamo and result.metrics.applied.compiled_graphs == 0)
                                 or result.metrics.compiled_code_ran is False)


# The rules that decide what a report may call a finding, in one place (the report texts quote them from here).
# ⚠ marks a figure whose 95 % interval reaches further than this from it (relative), on either side.
WIDE_INTERVAL = 0.05
# A verdict (a speedup that P3 counts, "fastest") needs this many worker processes on each side and a passed check.
VERDICT_PROCESSES = 3
# A figure over this multiple of the GPU's catalog bound cannot have been measured: no verdict, and the reason shown
PLAUSIBLE_OF_SPEC = 1.1
# ... and on a CPU, per thread it ran: about twice what AMX's bf16 tiles reach on one core, and an L1 cache's read
# rate (a tiny model's weights fit in cache): generous, so that only an impossible figure trips them
CPU_TFLOPS_PER_THREAD = 8.0
CPU_GBS_PER_THREAD = 500.0
# Below this whole-call time the GPU time of one call decides where both sides have it: the host's launch cost moves
# a sub-millisecond call up to 2x between processes (docs/methodology.md), the device time far less.
DEVICE_TIME_BELOW_MS = 1.0
# ⚠ marks a CPU figure whose timed calls began or ended with the machine's 1-minute load average over this many
# runnable threads per logical CPU: other work shared its CPUs (75-100x slower on a loaded 2-core host)
OVERSUBSCRIBED_LOAD = 1.0
RULES = (f"⚠: the figure's 95 % interval reaches more than ±{100 * WIDE_INTERVAL:g} % from it, a process was "
         f"lost, the GPU throttled during the timed calls (NVML, read while they ran), the CPU host was "
         f"oversubscribed (load average over {OVERSUBSCRIBED_LOAD:g} per CPU as they began or ended), or a figure "
         f"came out over 100 % of a bound (then the bound or the timing is wrong). A verdict (a speedup P3 counts, "
         f"\"fastest\") needs ≥ {VERDICT_PROCESSES} worker processes on each side and a passed correctness check: "
         f"cells with fewer show \"n=1\" / \"n=2, no verdict\", a cell that failed its check gets no speedup. Cells "
         f"under {DEVICE_TIME_BELOW_MS:g} ms are judged on device time (the GPU time of one call without the host's "
         f"launch cost) where both sides have it, and say so.")

FigureName = Literal["whole call", "device time"]


def processes_of(result: Result) -> int:
    """The worker processes behind a result's figure (a Timing stored as one worker reported it is one process)."""
    latency = result.metrics.latency
    return 0 if latency is None else len(latency.processes) or 1


def program_processes(result: Result) -> int:
    """The processes of one program behind a result's figure, what a verdict counts: a pooled figure's warm ones (its
    cold ones joined it where a test found no difference, which does not make them the same program), else all."""
    latency = result.metrics.latency
    if latency is not None and latency.series == "pooled":
        return sum(1 for process in latency.processes if process.compile_cache != "cold")
    return processes_of(result)


def check_failed(result: Result) -> bool:
    return result.correctness is not None and not result.correctness.passed


def timed_calls_unchecked(result: Result) -> bool:
    """An LLM cell whose timed calls compared under TIMED_TOKENS_CHECKED of their tokens with their prompt's checked
    call: its check cannot vouch for the calls it timed."""
    check = result.correctness
    return (check is not None and check.timed_tokens is not None and check.timed_tokens_compared is not None
            and check.timed_tokens_compared < TIMED_TOKENS_CHECKED * check.timed_tokens)


def implausible(result: Result) -> Optional[str]:
    """Why a figure cannot have been measured (the timing, or outputs that were not computed, are wrong): over
    PLAUSIBLE_OF_SPEC of the GPU's catalog bound; on a CPU, over CPU_TFLOPS_PER_THREAD (synthetic) or its decode
    step's bytes read faster than CPU_GBS_PER_THREAD (LLM) per thread it ran. None where it is plausible."""
    job, metrics, latency = result.job, result.metrics, result.metrics.latency
    if result.status != "ok":
        return None
    if job.device == "cuda":
        fraction = spec_fraction(result)
        bound = "decode bandwidth bound" if kind_of(job) == "llm" else "peak TFLOPS"
        return (f"{fraction:.0%} of the GPU's catalog {bound}" if fraction is not None and fraction > PLAUSIBLE_OF_SPEC
                else None)
    threads = max((process.cpu_threads for process in (latency.processes if latency else [])
                   if process.cpu_threads), default=None)
    if threads is None:
        return None
    if kind_of(job) == "synthetic":
        bound = CPU_TFLOPS_PER_THREAD * threads
        return (f"{metrics.tflops:.3g} TFLOPS on {threads} CPU thread(s), over {bound:g}"
                if metrics.tflops is not None and metrics.tflops > bound else None)
    step_bytes = decode_step_bytes(job)
    if metrics.tokens_per_s is None or step_bytes is None:
        return None
    read_gbs = step_bytes * metrics.tokens_per_s / job.batch_size / 1e9
    bound = CPU_GBS_PER_THREAD * threads
    return (f"{metrics.tokens_per_s:.3g} tok/s reads its weights at {read_gbs:.3g} GB/s on {threads} CPU thread(s), "
            f"over {bound:g}" if read_gbs > bound else None)


def throttled_during(result: Result) -> bool:
    """A slowdown NVML reported while the timed calls ran (readings before or after them say nothing of the calls)."""
    latency = result.metrics.latency
    return latency is not None and any(reading.throttled for process in latency.processes
                                       for reading in process.clocks if reading.at == "during")


def energy_of(result: Result) -> Optional[CellEnergy]:
    """The cell's energy over the processes of its figure (a result stored as one worker reported it: that
    process's); None where none measured it."""
    latency = result.metrics.latency
    if result.status != "ok" or latency is None:
        return None
    return latency.energy or stats.cell_energy(latency.processes)


def _scaled_estimate(estimate: Estimate, factor: float) -> Estimate:
    return Estimate(value=estimate.value * factor, low=None if estimate.low is None else estimate.low * factor,
                    high=None if estimate.high is None else estimate.high * factor)


def tokens_per_call(job: JobSpec) -> int:
    """The tokens one timed LLM call generates (what tokens/s counts)."""
    return job.batch_size * job.output_len


def joules_per_unit(result: Result) -> Optional[tuple[Estimate, str]]:
    """Joules per generated token (LLMs, "J/token") or per call (synthetic, "J/call"), with the interval."""
    energy = energy_of(result)
    if energy is None or energy.joules_per_call is None:
        return None
    if kind_of(result.job) == "llm":
        return _scaled_estimate(energy.joules_per_call, 1 / tokens_per_call(result.job)), "J/token"
    return energy.joules_per_call, "J/call"


def oversubscribed(result: Result) -> Optional[float]:
    """The highest load per logical CPU at the edges of a CPU cell's timed calls, where it is over OVERSUBSCRIBED_LOAD
    (more threads were runnable than the machine has CPUs); else None."""
    latency = result.metrics.latency
    worst = max((load for process in (latency.processes if latency else []) for load in process.host_load),
                default=None)
    return worst if worst is not None and worst > OVERSUBSCRIBED_LOAD else None


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
    if implausible(result):
        return "implausible"
    if not_compiled(result):
        return "not compiled"
    if timed_calls_unchecked(result):
        return "timed calls not checked"
    processes = program_processes(result)
    if processes < VERDICT_PROCESSES:
        return f"n={processes}"
    if result.job.workflow != REFERENCE and result.correctness is None:
        return "not checked"
    return None


def ratio_label(ratio: stats.Ratio) -> str:
    """'2.00× [1.90–2.10]'; where the interval holds 1.0, '≈ [0.99–1.02] (equal within 2.0 %)' when it leaves open no
    difference wider than WIDE_INTERVAL (a decisive "the same"), else '≈ (not significant)'; '2.00× (no interval)'."""
    if ratio.significant is False:
        margin = ratio.equal_within
        if margin is not None and margin <= WIDE_INTERVAL:
            return f"≈ [{ratio.low:.3f}–{ratio.high:.3f}] (equal within {100 * margin:.1f} %)"
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
    # eager's GPU and this result's, where no eager run on this result's own GPU was there to pair it with
    across_gpus: Optional[str] = None
    # eager's joules per call / this result's (> 1: this result's calls take less energy, more tokens per joule), with
    # its interval; None where either side has no energy figure
    energy: Optional[stats.Ratio] = None

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
        if self.across_gpus:
            text += f" vs eager {self.across_gpus}"
        # the candidate's own evidence is shown beside its figure; the baseline's only here
        return text + (f", eager {self.baseline_no_verdict}: no verdict" if self.baseline_no_verdict else "")


@dataclass(frozen=True)
class PerfRow(CellKey):
    """One stored result with its figure of merit (tokens/s for LLMs, TFLOPS for synthetic models), its 95 % interval,
    and the speedup over eager for the same model, batch, precision, settings, env and GPU tag (on the same physical
    GPU where eager ran there)."""

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
    def energy(self) -> Optional[tuple[Estimate, str]]:
        """Joules per generated token (LLM) or per call (synthetic), with the interval (joules_per_unit)."""
        return joules_per_unit(self.result) if self.value is not None else None

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
        load = oversubscribed(self.result)
        if load is not None:
            found.append(f"host oversubscribed (load {load:.1f} per CPU)")
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
        return of_decode_bound(job, latency.step_median_ms if latency else None,
                               peaks.bandwidth_gbs if peaks else None)
    if metrics.peak_fraction is not None:
        return metrics.peak_fraction
    return of_peak(metrics.tflops, peak_tflops(gpu_of(result), job.precision, metrics.accumulation))


def physical_gpu(result: Result) -> Optional[tuple[Optional[str], str]]:
    """(host, GPU UUID) of the GPU that measured a result; None where its UUID was not recorded."""
    gpu = result.provenance.gpu
    return None if gpu is None or gpu.uuid is None else (result.provenance.hostname, gpu.uuid)


def _describe_gpu(result: Result) -> str:
    host, uuid = physical_gpu(result)  # type: ignore[misc]
    return f"{uuid[:12]}" + (f" on {host}" if host else "")


def across_gpus(first: Result, second: Result) -> Optional[str]:
    """'across GPUs: GPU-1a2b3c4d on h1 / GPU-5e6f7a8b on h1' where two results were measured on two physical GPUs
    (both recorded); None where on one, or where either did not record its GPU."""
    a, b = physical_gpu(first), physical_gpu(second)
    if a is None or b is None or a == b:
        return None
    return f"across GPUs: {_describe_gpu(first)} / {_describe_gpu(second)}"


def _baseline_key(result: Result) -> tuple[str, str, str, str, int, str]:
    """Everything but the workflow and its options: the results a speedup may compare."""
    job = result.job
    return (gpu_of(result), env_of(result), job.model, job.precision, job.batch_size, job.baseline_settings)


def _speedup(result: Result, baselines: list[Result]) -> Optional[Speedup]:
    """Against an eager run on the same physical GPU (UUID and host) where there is one, then of the same sweep, then
    the latest; a baseline of another sweep or on another GPU is named. A result that failed its check gets none."""
    latency = result.metrics.latency
    if result.job.workflow == REFERENCE or _value(result) is None or latency is None or not baselines \
            or not_compiled(result) or check_failed(result):
        return None

    def preference(baseline: Result) -> tuple[int, bool, float]:
        own, theirs = physical_gpu(result), physical_gpu(baseline)
        gpu = 1 if own is None or theirs is None else 2 if own == theirs else 0  # unknown between same and other
        ended = baseline.provenance.ended_at
        return gpu, baseline.provenance.sweep_id == result.provenance.sweep_id, ended.timestamp() if ended else 0.0

    baseline = max(baselines, key=preference)
    other = None if baseline.provenance.sweep_id == result.provenance.sweep_id \
        else (baseline.provenance.sweep_id or "unknown")
    ratio, figure = time_ratio(baseline.metrics.latency, latency)  # type: ignore[arg-type]
    whole_call = stats.speedup(baseline.metrics.latency, latency) if figure == "device time" else None  # type: ignore
    return Speedup(ratio, baseline_sweep=other, figure=figure, baseline_no_verdict=no_verdict(baseline),
                   candidate_no_verdict=no_verdict(result), whole_call=whole_call,
                   across_gpus=across_gpus(baseline, result),
                   energy=stats.energy_ratio(latency, baseline.metrics.latency))  # type: ignore[arg-type]


def calibration_for(result: Result, calibrations: Sequence[Calibration]) -> Optional[Calibration]:
    """The ceiling measured in the result's own sweep on its GPU, else the latest measured on that GPU model."""
    gpu = result.provenance.gpu
    same_model = [c for c in calibrations if c.gpu_tag == gpu_of(result) and c.copy_gbs is not None]
    same_sweep = [c for c in same_model if c.sweep_id == result.provenance.sweep_id
                  and (gpu is None or c.gpu is None or c.gpu.uuid == gpu.uuid)]
    chosen = same_sweep or same_model
    return max(chosen, key=lambda c: c.measured_at.timestamp() if c.measured_at else 0.0) if chosen else None


def measured_fraction(result: Result, calibrations: Sequence[Calibration]) -> Optional[float]:
    """As spec_fraction, against what a sweep measured on the GPU: the copy bandwidth (LLM), the matmul rate
    (synthetic)."""
    calibration, metrics, job = calibration_for(result, calibrations), result.metrics, result.job
    if result.status != "ok" or job.device != "cuda" or calibration is None:
        return None
    if kind_of(job) == "llm":
        latency = metrics.latency
        return of_decode_bound(job, latency.step_median_ms if latency else None, calibration.copy_gbs)
    return of_peak(metrics.tflops, calibration.gemm_tflops.get(job.precision))


def perf_rows(results: Iterable[Result], calibrations: Sequence[Calibration] = (),
              attempts: Iterable[Result] = ()) -> list[PerfRow]:
    """`attempts`: every stored run of those cells, of which eager's may be the baseline on a result's own GPU where
    the cell's latest eager result ran on another."""
    results = list(results)
    eager: dict[tuple, list[Result]] = defaultdict(list)
    for result in [*results, *attempts]:
        if result.job.workflow == REFERENCE and _value(result) and result.metrics.latency is not None:
            eager[_baseline_key(result)].append(result)
    rows = []
    for result in results:
        rows.append(PerfRow(
            **vars(CellKey.of(result)), kind=kind_of(result.job), status=result.status, reason=result.reason,
            value=_value(result), speedup=_speedup(result, eager.get(_baseline_key(result), [])),
            efficiency=spec_fraction(result), accumulation=result.metrics.accumulation,
            correct=result.correctness.passed if result.correctness else None, result=result,
            measured_efficiency=measured_fraction(result, calibrations)))
    return sorted(rows, key=lambda r: (r.kind, r.model, r.gpu, r.env, r.settings, workflow_order(r.workflow),
                                       r.precision, r.batch))
