from datetime import datetime
from typing import Any, Literal, Optional, Union

from pydantic import Field, create_model, field_validator, model_validator

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.catalog import REFERENCE
from mlcbench.schema.jobs import JobSpec
from mlcbench.schema.legacy import stored_job
from mlcbench.schema.options import OPTION_CLASSES
from mlcbench.schema.protocol import Startup

Status = Literal["ok", "unsupported", "failed", "oom", "timeout", "crashed"]
# Statuses that another run in the same env on the same GPU would only repeat: resume skips them.
FINAL_STATUSES: frozenset[str] = frozenset({"ok", "unsupported"})

Setting = Union[bool, int, float, str, None]
# how a process's device time was taken: each CUDA-graph replay of the call timed alone, queued behind a spinning
# kernel so that the host's launch of it is not timed (cuda_graph_replay_queued); the same without the spin, the
# graph's launch included (cuda_graph_replay: stored before the spin); the profiler's summed kernel time
# (profiler_kernels)
DeviceMethod = Literal["cuda_graph_replay_queued", "cuda_graph_replay", "profiler_kernels"]


NOISY_CV = 0.05

# the GPU's energy counter (NVML's total energy since the driver loaded), read at the edges of the timed calls' window
EnergyMethod = Literal["nvml_energy_counter_timed_window"]
ENERGY_METHOD: EnergyMethod = "nvml_energy_counter_timed_window"


class TimedWindow(StrictModel):
    """The wall-clock edges of a process's exclusive window on its GPU: from the moment it held the GPU alone (its
    neighbours stopped, their queued work drained) through its warm-up, timed calls and the figures after them."""

    opened_at: datetime
    closed_at: datetime
    waited_s: float = Field(ge=0, description="waiting for the gate: another process's window was open")
    neighbours_stopped: int = Field(ge=0, description="other processes on the GPU stopped while this one timed")


class EnergyWindow(StrictModel):
    """The GPU's energy over one process's timed calls: NVML's energy counter read at the edges of the window they are
    timed in (after the warm-up's sync, after the last call's), with the GPU's temperature at both edges. No figure
    (joules None) where there is no counter, it went backwards or did not move, the window is too short for its update
    period, or the mean power is above the GPU's power limit x 1.1: `reason` says which."""

    method: EnergyMethod = ENERGY_METHOD
    joules: Optional[float] = Field(None, description="the counter's rise over the window")
    window_s: Optional[float] = Field(None, description="host seconds between the two readings")
    calls: int = Field(ge=1, description="timed calls in the window")
    update_period_s: Optional[float] = Field(
        None, description="the counter's update period on this GPU the window was judged by (the longer of the "
                          "calibration's and this process's re-check): a figure needs it to be at most 5 % of the window")
    rechecked_period_s: Optional[float] = Field(
        None, description="the update period this process measured again after its window")
    power_limit_w: Optional[float] = Field(
        None, description="the GPU's enforced power limit: a mean power above 1.1 x it gives no figure")
    temperature_start_c: Optional[int] = None
    temperature_end_c: Optional[int] = None
    # the check of the counter (MLCBENCH_POWER_CHECK): nvmlDeviceGetPowerUsage sampled through the same window,
    # integrated over time
    sampled_joules: Optional[float] = None
    power_samples: int = 0
    reason: Optional[str] = Field(None, description="why there is no figure")

    @property
    def joules_per_call(self) -> Optional[float]:
        return None if self.joules is None else self.joules / self.calls

    @property
    def mean_power_w(self) -> Optional[float]:
        return None if self.joules is None or not self.window_s else self.joules / self.window_s


# A timed LLM call counts as checked where its tokens were compared with its prompt's checked call at this share of the
# timed calls' tokens at least: a cell below it says "timed calls not checked"
TIMED_TOKENS_CHECKED = 0.9


class Correctness(StrictModel):
    """The workflow's output against eager PyTorch on the same inputs and weights."""

    reference: str = REFERENCE
    # outputs: a synthetic model's output tensor; teacher_forced: an LLM fed eager's greedy tokens, its logits compared
    # with eager's at every output step (prefill and each decode step); greedy_prefix: logits compared only while the
    # workflow's own greedy tokens agree with eager's (for a workflow that cannot take given tokens: names why in
    # `note`)
    method: Optional[Literal["outputs", "teacher_forced", "greedy_prefix"]] = None
    steps_checked: Optional[int] = Field(None, description="LLM: output steps whose logits were compared")
    worst_step: Optional[int] = Field(None, description="LLM: the output step with the largest error (0: prefill)")
    # teacher_forced: the check is per batch row; rel_l2_error and tolerance are those of the row nearest its tolerance
    worst_row: Optional[int] = Field(None, description="LLM: the batch row nearest its tolerance")
    tokens_beyond_noise: Optional[int] = Field(
        None, ge=0, description="LLM: the workflow's own token choices that differ from eager's by more than eager's "
                                "margin allows as numerical noise (any fails the check)")
    worst_token_margin: Optional[float] = Field(
        None, description="LLM: the largest share of the noise allowed there that eager's margin between its token and "
                          "a differing choice took (over 1: beyond noise; 0: every choice eager's)")
    calls_checked: Optional[int] = Field(
        None, description="LLM: calls this process checked: its first, and one after its timed calls on the caches "
                          "they used (None: stored before the second)")
    timed_calls_checked: Optional[int] = Field(
        None, ge=0, description="timed calls whose own outputs were compared with the checked call's (synthetic: the "
                                "whole output; LLM: its free-running tokens against eager's) (None: stored before)")
    timed_calls_failed: Optional[int] = Field(
        None, ge=0, description="of those, the calls that differed (any fails the check)")
    free_running_tokens: Optional[int] = Field(
        None, ge=0, description="LLM: the tokens of the timed calls compared with eager's free-running ones for the "
                                "same prompt: in each row, the steps before eager's first whose top-2 margin is within "
                                "numerical noise (stored before input sets: of each timed call)")
    input_sets: Optional[int] = Field(
        None, ge=1, description="seeded input sets (prompts, or a synthetic model's inputs) cycled through the timed "
                                "calls, each with its own checked call (None: stored before, every call the same)")
    timed_tokens: Optional[int] = Field(None, ge=0, description="LLM: the tokens its timed calls generated")
    timed_tokens_compared: Optional[int] = Field(
        None, ge=0, description="LLM: of those, the tokens compared with their input set's checked call, which ran free "
                                "on the same prompt: in each row up to where the two part within that call's own "
                                "noise (under 90 % of timed_tokens: \"timed calls not checked\")")
    identical_to_reference: Optional[bool] = Field(
        None, description="LLM: every logit bit-identical to eager's, or every row within 5 % of eager's own error "
                          "against fp32 of eager's (eager's output with an epsilon), which no compiled path computes "
                          "unless its catalog row says it runs eager's kernels (runs_eager_kernels): the check fails")
    note: Optional[str] = None
    max_abs_diff: Optional[float] = None
    rel_l2_error: Optional[float] = None
    cosine: Optional[float] = None
    token_agreement: Optional[float] = Field(None, ge=0, le=1, description=(
        "LLM: the share of the workflow's own token choices that are eager's (teacher-forced results stored before "
        "token_agreement_within_noise existed gave that share here)"))
    token_agreement_within_noise: Optional[float] = Field(None, ge=0, le=1, description=(
        "LLM, teacher_forced: the share of its token choices that are eager's or within eager's numerical noise there"))
    tolerance: float
    passed: bool
    not_finite: Optional[str] = Field(None, description="why nothing was compared: the outputs that hold NaN or "
                                                        "infinite values, and how many (the check fails)")
    # a cell's check combines its processes' own checks: it passes only when every process passed
    processes_checked: Optional[int] = None
    processes_failed: Optional[int] = None


class Estimate(StrictModel):
    """A figure over a cell's processes with its 95 % interval (none with one process)."""

    value: float
    low: Optional[float] = None
    high: Optional[float] = None


class CellEnergy(StrictModel):
    """A cell's energy over the processes of its figure whose window gave one (EnergyWindow): geometric means of the
    process figures with Student's t over their logarithms, as the time's; the temperatures (over every process that
    read them) as arithmetic means with Student's t."""

    method: EnergyMethod = ENERGY_METHOD
    processes: int = Field(0, description="processes whose window gave a figure")
    joules_per_call: Optional[Estimate] = None
    power_w: Optional[Estimate] = Field(None, description="the counter's joules / the window's seconds")
    temperature_start_c: Optional[Estimate] = None
    temperature_end_c: Optional[Estimate] = None
    sampled_ratio: Optional[Estimate] = Field(
        None, description="nvmlDeviceGetPowerUsage sampled over the same window, integrated, / the counter's joules "
                          "(MLCBENCH_POWER_CHECK)")
    reason: Optional[str] = Field(None, description="why no process gave a figure (the first reason a process gave); "
                                                    "set whenever no process did")


class CacheCounts(StrictModel):
    """What one process's compile found in its compilers' on-disk caches, as the compilers count it (None: that cache
    was not consulted). A warm process shows hits and no misses: the proof that it started from what an earlier one
    compiled."""

    # Inductor's FX graph cache, AOTAutograd's cache and dynamo's precompile cache (torch.compile's counters); a
    # bypass is a graph the cache refused to store or look up (compiled every time)
    fx_graph_hits: Optional[int] = None
    fx_graph_misses: Optional[int] = None
    fx_graph_bypasses: Optional[int] = None
    aot_autograd_hits: Optional[int] = None
    aot_autograd_misses: Optional[int] = None
    aot_autograd_bypasses: Optional[int] = None
    dynamo_precompile_hits: Optional[int] = None
    dynamo_precompile_misses: Optional[int] = None
    # JAX's persistent compilation cache: XLA programs loaded from it / compiled and written to it
    jax_hits: Optional[int] = None
    jax_misses: Optional[int] = None
    # torchax: traced forwards loaded as exported StableHLO / traced in this process and exported
    traces_loaded: Optional[int] = None
    traces_exported: Optional[int] = None


class ProcessTiming(StrictModel):
    """The timed calls of a cell in one worker process, in milliseconds, in call order."""

    samples_ms: list[float] = Field(min_length=1)
    # how many calls were timed: more than samples_ms holds where it keeps every k-th of many (a minimum window)
    timed_calls: Optional[int] = None
    sweep_id: Optional[str] = Field(None, description="the sweep that ran this process (a resumed cell holds "
                                                      "processes of several)")
    round: int = Field(default=0, description="the sweep's round that ran this process")
    position: int = Field(default=0, description="the cell's place in that round's shuffled order")
    # what preparing the cell cost this process: the first compiles cold, later ones may find Inductor's cache warm
    compile_s: Optional[float] = None
    compile_cache: Optional[Literal["cold", "warm"]] = None
    cache_counts: Optional[CacheCounts] = None  # Metrics.cache_counts of this process
    compiler_import_s: Optional[float] = None  # Metrics.compiler_import_s of this process
    # every process checks its own first call against eager (a cell fails its check when one process fails)
    correctness: Optional["Correctness"] = None
    # synthetic: the GPU time of one call without the host's launch cost, per timed call (empty where not measured)
    device_samples_ms: list[float] = []
    device_method: Optional[DeviceMethod] = None
    # LLM: the prefill of the same process, timed as the calls are (not synchronised per token), and the per-step time
    # of the timed calls: (median call - prefill_ms) / (output steps - 1)
    prefill_ms: Optional[float] = None
    step_ms: Optional[float] = None
    # CPU: torch's intra-op threads in this process (the worker sets them), and the machine's 1-minute load average per
    # logical CPU when the timed calls began and when they ended (over 1: more runnable threads than CPUs, flagged)
    cpu_threads: Optional[int] = None
    host_load: list[float] = []
    # NVML readings taken while the timed calls ran (not before or after them): "throttled" is read from these
    clocks: list["Clocks"] = []
    energy: Optional[EnergyWindow] = None
    # what the process cost before its first timed call, compile excluded: from the host's launch (or the end of the
    # worker's previous job) through interpreter, imports, CUDA, the model's build and eager's reference
    startup_s: Optional[float] = None
    # when the host launched the worker and when this process's job ended (the sweep's wall-time breakdown)
    launched_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None
    # where it ran (a study resumed on another machine holds processes of several; older stores lack them): a machine's
    # compiler caches stay with it, so a cell's first process on another machine compiles again
    host: Optional[str] = None
    gpu_uuid: Optional[str] = None
    # where processes share a GPU (--overlap): this one's exclusive window, and the seconds of its life (and of its
    # compile, already taken out of compile_s) that it stood stopped while a neighbour timed
    window: Optional[TimedWindow] = None
    stopped_s: Optional[float] = None
    compile_stopped_s: Optional[float] = None


class Timing(StrictModel):
    """Statistics of a cell's timed calls, in milliseconds: over one worker process's calls as the worker reports them,
    over every process once the host has combined a cell's processes (reference: orchestrator/stats.py)."""

    median_ms: float = Field(description="one process: the median call; combined: geometric mean of process medians")
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float = Field(description="coefficient of variation (stdev / mean) of the calls inside one process "
                                  "(combined: pooled over processes)")
    repeats: int = Field(description="timed calls, in all processes")
    # cuda_events: each call alone between two CUDA events, recorded after the previous call has finished (so it
    # includes the launch); perf_counter: the same with the host clock and a sync. The same for every workflow.
    method: Literal["cuda_events", "perf_counter"]
    processes: list[ProcessTiming] = []
    cv_between: Optional[float] = Field(None, description="stdev / mean of the process medians")
    ci_low_ms: Optional[float] = Field(None, description="95 % interval of median_ms")
    ci_high_ms: Optional[float] = None
    interval: Optional[Literal["t_log_process_medians"]] = Field(
        None, description="how the interval was built: Student's t over the log process medians")
    converged: Optional[bool] = Field(None, description="the interval reached the repetition target")
    lost_processes: int = Field(0, description="processes of the cell that crashed or failed after others ran")
    # one program per cell: the processes the figure combines (warm only; cold only where no warm process ran; or
    # pooled where a test of the two samples found no difference)
    series: Optional[Literal["warm", "cold", "pooled"]] = None
    # the cell's other series, not in the figure: its cold processes where a test found them to differ from the warm
    # ones (reference: orchestrator/stats.py combine_cell)
    other_series: list[ProcessTiming] = []
    # synthetic: the GPU time of one call without the host's launch cost, over the same processes (geometric mean of
    # process medians, 95 % interval as for median_ms)
    device_median_ms: Optional[float] = None
    device_ci_low_ms: Optional[float] = None
    device_ci_high_ms: Optional[float] = None
    device_method: Optional[DeviceMethod] = None
    # LLM: the per-step time of the timed calls over the same processes
    step_median_ms: Optional[float] = None
    step_ci_low_ms: Optional[float] = None
    step_ci_high_ms: Optional[float] = None
    # the GPU's energy over the same processes' timed calls
    energy: Optional[CellEnergy] = None

    @property
    def noisy(self) -> bool:
        return self.cv > NOISY_CV or (self.cv_between or 0.0) > NOISY_CV


DecodeLoop = Literal["hf_generate", "greedy_no_kv_cache", "greedy_onnx_kv_cache", "compiled_step", "tensorrt_llm"]
KvCache = Literal["dynamic", "static", "none", "paged"]
Accumulation = Literal["fp32", "fp16"]


def _options_applied() -> Any:
    """Every workflow option as a field of Applied, typed as its options class declares it (None: not recorded)."""
    fields: dict[str, Any] = {}
    for options in OPTION_CLASSES:
        for name, info in options.model_fields.items():
            fields.setdefault(name, (Optional[info.annotation], None))
    return create_model("OptionsApplied", __base__=StrictModel, **fields)


_OptionsApplied: Any = _options_applied()


class Applied(_OptionsApplied):
    """What a workflow decided and applied, as fields the reports and the P3 scoring read (never parsed out of
    free-form settings): its options as it ran them, and what else it chose."""

    backend: Optional[str] = None
    # LLMs: Hugging Face's generate(), or a loop of the workflow's own (which a user would have to write too)
    decode_loop: Optional[DecodeLoop] = None
    kv_cache: Optional[KvCache] = None
    # one build serves other batch sizes or sequence lengths (a dynamic cache, dynamic export axes)
    dynamic_shapes: Optional[bool] = None
    accumulation: Optional[Accumulation] = None
    execution_providers: tuple[str, ...] = ()
    export: Optional[Literal["torch.export", "onnx"]] = None
    # graphs dynamo compiled through the first call, or loaded whole from its precompile cache (0: the workflow ran
    # eagerly, whatever its name)
    compiled_graphs: Optional[int] = None
    # the on-disk caches its compiles read and wrote: "inductor" (FX graphs, AOTAutograd, Triton kernels, autotuning),
    # "dynamo_precompile" (traced graphs and their guards)
    compile_caches: tuple[str, ...] = ()


class CompileCost(StrictModel):
    """What preparing a cell cost in the processes of one series (cold: an empty cache; warm: caches filled)."""

    median_s: float
    min_s: float
    max_s: float
    n: int = Field(ge=1)


class Metrics(StrictModel):
    latency: Optional[Timing] = None
    compile_s: Optional[float] = Field(None, description="JIT: preparation + first call; AOT: build time")
    compile_cache: Optional[Literal["cold", "warm"]] = Field(
        None, description="warm: every graph came from an on-disk cache (Inductor's, or dynamo's precompile cache); "
                          "cold: one was compiled")
    compile_cold: Optional[CompileCost] = None
    compile_warm: Optional[CompileCost] = None
    cache_counts: Optional[CacheCounts] = Field(None, description="what the compile found in the compilers' on-disk "
                                                                  "caches, as they count it")
    load_s: Optional[float] = Field(None, description="model construction / loading")
    compiler_import_s: Optional[float] = Field(
        None, description="importing the workflow's compiler (its catalog row's compiler_modules) before the model is "
                          "built: once a process, caches or not, so not part of compile_s")
    torch_peak_mem_bytes: Optional[int] = None
    nvml_peak_mem_bytes: Optional[int] = None
    # synthetic
    flops: Optional[float] = None
    tflops: Optional[float] = None
    peak_fraction: Optional[float] = Field(None, description="tflops / catalog peak for precision + accumulation")
    # llm
    tokens_per_s: Optional[float] = None
    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    output_tokens: Optional[int] = None
    bandwidth_fraction: Optional[float] = Field(
        None, description="bytes a decode step reads (weights + KV cache) / tpot over the catalog bandwidth")
    graph_breaks: Optional[int] = None
    recompiles: Optional[int] = None
    compiled_code_ran: Optional[bool] = Field(
        None, description="synthetic: False where a call after the timed ones ran eager's own PyTorch ops in eager's "
                          "order (no dynamo graph, TorchScript graph, ONNX Runtime or XLA program ran: \"not "
                          "compiled\"); None: eager, or not looked at")
    applied: Applied = Applied()
    # free-form provenance a workflow records beside (library versions, paths, its stack's own options)
    settings: dict[str, Setting] = {}

    @model_validator(mode="before")
    @classmethod
    def _legacy_accumulation(cls, data: Any) -> Any:
        """Stores written before `applied` existed carry the accumulation mode at the top level."""
        if isinstance(data, dict) and "accumulation" in data:
            data = dict(data)
            accumulation = data.pop("accumulation")
            data["applied"] = {**dict(data.get("applied") or {}), "accumulation": accumulation}
        return data

    @property
    def accumulation(self) -> Optional[Accumulation]:
        return self.applied.accumulation

    @property
    def peak_mem_bytes(self) -> Optional[int]:
        known = [v for v in (self.torch_peak_mem_bytes, self.nvml_peak_mem_bytes) if v is not None]
        return max(known) if known else None

    def worker_processes(self) -> list[ProcessTiming]:
        """A worker's timed process (none where nothing was timed), with the compile facts of its job: what a host
        combines into a cell (orchestrator/stats.py combine_cell)."""
        if self.latency is None:
            return []
        return [process.model_copy(update={"compile_s": self.compile_s, "compile_cache": self.compile_cache,
                                           "cache_counts": self.cache_counts,
                                           "compiler_import_s": self.compiler_import_s})
                for process in self.latency.processes]


class GpuInfo(StrictModel):
    name: str
    uuid: Optional[str] = None
    index: Optional[int] = None
    driver: Optional[str] = None
    compute_capability: Optional[str] = None
    memory_total_bytes: Optional[int] = None
    sm_clock_mhz: Optional[int] = None
    mem_clock_mhz: Optional[int] = None


# NVML's clock event reasons that slow the GPU down (idle, application clocks, sync boost do not)
SLOWDOWN_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})


class Clocks(StrictModel):
    """The job's GPU as NVML sees it at the start or the end of the job, or while its timed calls run."""

    at: Literal["start", "end", "during"]
    sm_mhz: Optional[int] = None
    mem_mhz: Optional[int] = None
    power_limit_w: Optional[float] = None
    temperature_c: Optional[int] = None
    reasons: list[str] = Field(default=[], description="NVML clock event (throttle) reasons, e.g. sw_thermal")

    @property
    def throttled(self) -> bool:
        return bool(SLOWDOWN_REASONS.intersection(self.reasons))


class Provenance(StrictModel):
    env: Optional[str] = None
    image_digest: Optional[str] = None
    gpu_tag: Optional[str] = None
    gpu: Optional[GpuInfo] = None
    packages: dict[str, str] = {}
    python: Optional[str] = None
    hostname: Optional[str] = None
    # eager generate() is bound by the host (Python, kernel launches): two GPUs compared on different hosts differ by
    # their CPUs too
    host_cpu: Optional[str] = Field(None, description="the CPU's model name as the worker saw it (a container sees "
                                                      "the host's)")
    host_cpus: Optional[int] = Field(None, description="logical CPUs the worker process may run on")
    git_rev: Optional[str] = None
    # the host's hash of what decided which workflows the env could run (env files, installed packages): an
    # `unsupported` result decided under another configuration is tried again
    config_key: Optional[str] = None
    started_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None
    sweep_id: Optional[str] = None
    order_seed: Optional[int] = Field(None, description="seeds the shuffled order of the cells in each round")
    # cell: every worker process ran one process of one cell (fresh processes per cell); round: a worker process ran
    # its share of a round's cells one after another (fewer start-ups, shared process state)
    worker_scope: Optional[Literal["cell", "round"]] = None
    startup: Optional[Startup] = Field(None, description="how the worker's interpreter started (protocol.Startup)")
    clocks: list[Clocks] = Field(default=[], description="at the start and end of each of the cell's processes")

    @property
    def throttled(self) -> bool:
        return any(reading.throttled for reading in self.clocks)


class Result(StrictModel):
    schema_version: Literal[1] = SCHEMA_VERSION
    job_id: str
    job: JobSpec
    status: Status
    reason: Optional[str] = Field(None, description="one line: why unsupported / failed")
    error: Optional[str] = None
    log_tail: Optional[str] = None
    exit_code: Optional[int] = None
    metrics: Metrics = Metrics()
    correctness: Optional[Correctness] = None
    provenance: Provenance = Provenance()

    @field_validator("job", mode="before")
    @classmethod
    def _as_stored(cls, job: Any) -> Any:
        """A job as any version stored it (schema/legacy.py)."""
        return stored_job(job)

    @classmethod
    def without_run(cls, job: JobSpec, status: Status, reason: str, **fields) -> "Result":
        """A result for a job that did not (or did not finish to) run."""
        return cls(job_id=job.job_id, job=job, status=status, reason=reason, **fields)


ProcessTiming.model_rebuild()
