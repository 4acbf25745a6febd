from datetime import datetime
from typing import Any, Literal, Optional, Union

from pydantic import Field, model_validator

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.jobs import JobSpec

Status = Literal["ok", "unsupported", "failed", "oom", "timeout", "crashed"]
# Statuses that another run in the same env on the same GPU would only repeat: resume skips them.
FINAL_STATUSES: frozenset[str] = frozenset({"ok", "unsupported"})

Setting = Union[bool, int, float, str, None]


class Timing(StrictModel):
    """Statistics over the timed repeats of one call, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float = Field(description="coefficient of variation (stdev / mean)")
    repeats: int
    method: Literal["cuda_events", "perf_counter"]

    @property
    def noisy(self) -> bool:
        return self.cv > 0.05


DecodeLoop = Literal["hf_generate", "greedy_no_kv_cache", "greedy_onnx_kv_cache", "compiled_step", "tensorrt_llm"]
KvCache = Literal["dynamic", "static", "none", "paged"]
Accumulation = Literal["fp32", "fp16"]


class Applied(StrictModel):
    """What a workflow decided and applied, as fields the reports and the P3 scoring read (never parsed out of
    free-form settings)."""

    backend: Optional[str] = None
    compile_mode: Optional[str] = None
    # LLMs: Hugging Face's generate(), or a loop of the workflow's own (which a user would have to write too)
    decode_loop: Optional[DecodeLoop] = None
    kv_cache: Optional[KvCache] = None
    # one build serves other batch sizes or sequence lengths (a dynamic cache, dynamic export axes)
    dynamic_shapes: Optional[bool] = None
    accumulation: Optional[Accumulation] = None
    execution_providers: tuple[str, ...] = ()
    export: Optional[Literal["torch.export", "onnx"]] = None
    io_binding: Optional[bool] = None
    # graphs dynamo compiled through the first call (0: the workflow ran eagerly, whatever its name)
    compiled_graphs: Optional[int] = None


class Metrics(StrictModel):
    latency: Optional[Timing] = None
    compile_s: Optional[float] = Field(None, description="JIT: preparation + first call; AOT: build time")
    compile_cache: Optional[Literal["cold", "warm"]] = Field(
        None, description="warm: every graph Inductor compiled came from its on-disk cache; cold: one was compiled")
    load_s: Optional[float] = Field(None, description="model construction / loading")
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


class Correctness(StrictModel):
    """The workflow's output against eager PyTorch on the same inputs and weights."""

    reference: str = "eager"
    max_abs_diff: Optional[float] = None
    rel_l2_error: Optional[float] = None
    cosine: Optional[float] = None
    token_agreement: Optional[float] = Field(None, ge=0, le=1)
    tolerance: float
    passed: bool


class GpuInfo(StrictModel):
    name: str
    uuid: Optional[str] = None
    index: Optional[int] = None
    driver: Optional[str] = None
    compute_capability: Optional[str] = None
    memory_total_bytes: Optional[int] = None
    sm_clock_mhz: Optional[int] = None
    mem_clock_mhz: Optional[int] = None


class Provenance(StrictModel):
    env: Optional[str] = None
    image_digest: Optional[str] = None
    gpu_tag: Optional[str] = None
    gpu: Optional[GpuInfo] = None
    packages: dict[str, str] = {}
    python: Optional[str] = None
    hostname: Optional[str] = None
    git_rev: Optional[str] = None
    # the host's hash of what decided which workflows the env could run (env files, installed packages): an
    # `unsupported` result decided under another configuration is tried again
    config_key: Optional[str] = None
    started_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None


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

    @classmethod
    def without_run(cls, job: JobSpec, status: Status, reason: str, **fields) -> "Result":
        """A result for a job that did not (or did not finish to) run."""
        return cls(job_id=job.job_id, job=job, status=status, reason=reason, **fields)
