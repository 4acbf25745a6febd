from datetime import datetime
from typing import Literal, Optional, Union

from pydantic import Field

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


class Metrics(StrictModel):
    latency: Optional[Timing] = None
    compile_s: Optional[float] = Field(None, description="JIT: preparation + first call; AOT: build time")
    load_s: Optional[float] = Field(None, description="model construction / loading")
    torch_peak_mem_bytes: Optional[int] = None
    nvml_peak_mem_bytes: Optional[int] = None
    # synthetic
    flops: Optional[float] = None
    tflops: Optional[float] = None
    accumulation: Optional[Literal["fp32", "fp16"]] = None
    peak_fraction: Optional[float] = Field(None, description="tflops / catalog peak for precision + accumulation")
    # llm
    tokens_per_s: Optional[float] = None
    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    output_tokens: Optional[int] = None
    bandwidth_fraction: Optional[float] = Field(None, description="weight bytes / tpot over the catalog bandwidth")
    graph_breaks: Optional[int] = None
    recompiles: Optional[int] = None
    # the settings the workflow actually applied (compile mode, decode loop, execution provider ...)
    settings: dict[str, Setting] = {}

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
