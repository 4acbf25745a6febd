import hashlib
from typing import Literal, Optional

from pydantic import Field, field_validator

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.catalog import FAULT_WORKFLOWS, MODELS, WORKFLOWS

Precision = Literal["fp32", "fp16", "bf16"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class WorkflowOptions(StrictModel):
    """Knobs a workflow reads; each is recorded with the result. None means the workflow's own default."""

    compile_mode: Optional[CompileMode] = None
    io_binding: bool = True
    min_block_size: Optional[int] = Field(default=None, ge=1)
    fp32_accumulation: Optional[bool] = None


class JobSpec(StrictModel):
    """One measurement: a model, run through one workflow, at one precision and batch size."""

    schema_version: Literal[1] = SCHEMA_VERSION
    model: str
    workflow: str
    precision: Precision
    batch_size: int = Field(ge=1, le=4096)
    input_len: int = Field(default=32, ge=1, le=8192)
    output_len: int = Field(default=32, ge=1, le=8192)
    warmup: int = Field(default=3, ge=0, le=1000)
    repeats: int = Field(default=10, ge=1, le=10000)
    timeout_s: float = Field(default=1200.0, gt=0, le=86400)
    device: Literal["cuda", "cpu"] = "cuda"
    seed: int = 0
    options: WorkflowOptions = WorkflowOptions()
    # A local Hugging Face checkpoint folder for LLMs; random weights from the catalog config when None.
    model_path: Optional[str] = None

    @field_validator("model")
    @classmethod
    def _known_model(cls, name: str) -> str:
        if name not in MODELS:
            raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
        return name

    @field_validator("workflow")
    @classmethod
    def _known_workflow(cls, name: str) -> str:
        if name not in WORKFLOWS and name not in FAULT_WORKFLOWS:
            raise ValueError(f"unknown workflow {name!r}; known: {', '.join(WORKFLOWS)}")
        return name

    @property
    def job_id(self) -> str:
        """Stable identity: a hash of the canonical JSON of every field except the timeout (a limit, not a setting)."""
        canonical = self.model_dump_json(exclude={"timeout_s"})
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def label(self) -> str:
        return f"{self.model}/{self.workflow}/{self.precision}/b{self.batch_size}"
