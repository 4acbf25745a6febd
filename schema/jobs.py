import hashlib
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, Field, StrictInt, field_validator, model_validator

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel
from mlcbench.schema.catalog import FAULT_WORKFLOWS, MODELS, WORKFLOWS, ModelInfo
from mlcbench.schema.options import WorkflowOptions

Precision = Literal["fp32", "fp16", "bf16"]


def known_workflow(name: str) -> str:
    """The name, where it is a workflow of the catalog (or a fault workflow of the tests); else a ValueError."""
    if name not in WORKFLOWS and name not in FAULT_WORKFLOWS:
        raise ValueError(f"unknown workflow {name!r}; known: {', '.join(WORKFLOWS)}")
    return name


# a workflow of the catalog (or a fault workflow of the tests), wherever a name of one enters: job, suite entry
WorkflowName = Annotated[str, AfterValidator(known_workflow)]


class Repetition(StrictModel):
    """How often a cell is measured: in `processes` fresh worker processes (the unit of repetition) of one program
    (orchestrator/planner.py processes_due), a count fixed before any is timed. `target` is the interval half-width a
    cell's figure counts as converged at. `max_processes` and `max_s` belong to the adaptive rule of earlier versions
    (more processes while the interval was wider than `target`): a sweep no longer follows it, since stopping when
    the interval happens to look tight biases it; they stay so that stored job specs load and keep their job_id."""

    processes: int = Field(default=3, ge=1, le=100)
    max_processes: int = Field(default=3, ge=1, le=100)
    target: float = Field(default=0.02, gt=0, lt=1)
    max_s: float = Field(default=600.0, gt=0, le=86400)

    @model_validator(mode="before")
    @classmethod
    def _fixed_count(cls, data: Any) -> Any:
        """max_processes follows processes unless given (a stored spec carries its own)."""
        if isinstance(data, dict) and "processes" in data and "max_processes" not in data:
            data = {**data, "max_processes": data["processes"]}
        return data

    @model_validator(mode="after")
    def _cap_above_minimum(self) -> "Repetition":
        if self.max_processes < self.processes:
            raise ValueError(f"max_processes ({self.max_processes}) is below processes ({self.processes})")
        return self


class _CatalogModel(StrictModel):
    model: str

    @field_validator("model")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in MODELS:
            raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
        return name


class JobSpec(StrictModel):
    """One measurement: a model, run through one workflow, at one precision and batch size."""

    schema_version: Literal[1] = SCHEMA_VERSION
    model: str
    workflow: WorkflowName
    precision: Precision
    # strict: a job file's 1e3 or true is refused, not run as batch 1000 or 1
    batch_size: StrictInt = Field(ge=1, le=4096)
    input_len: StrictInt = Field(default=32, ge=1, le=8192)
    output_len: StrictInt = Field(default=32, ge=1, le=8192)
    warmup: StrictInt = Field(default=3, ge=0, le=1000)
    repeats: StrictInt = Field(default=10, ge=1, le=10000)
    repetition: Repetition = Repetition()
    timeout_s: float = Field(default=1200.0, gt=0, le=86400)
    device: Literal["cuda", "cpu"] = "cuda"
    seed: int = 0
    options: WorkflowOptions = WorkflowOptions()
    # A local Hugging Face checkpoint folder for LLMs; random weights from the model's config when None.
    model_path: Optional[str] = None
    # A suite's own model, carried whole so that a worker in any container can build it; None for the catalog's
    # models (and then left out of the job's identity, so that their job ids do not change)
    model_info: Optional[ModelInfo] = None

    @model_validator(mode="before")
    @classmethod
    def _known_model(cls, data: Any) -> Any:
        """A model the catalog has, or one the job carries; the error names the field, as a field's own would."""
        if isinstance(data, dict) and data.get("model_info") is None:
            _CatalogModel.model_validate({"model": data.get("model")})  # its error is located at "model"
        return data

    @model_validator(mode="before")
    @classmethod
    def _row_of_its_own(cls, data: Any) -> Any:
        """A job stored before a workflow built on another had its row (torch_compile_decode with mlcbench's kernels,
        now handtuned_decode) is read as that row's; its job id stays (see _canonical)."""
        if not isinstance(data, dict):
            return data
        options = data.get("options")
        given = options.model_dump() if isinstance(options, WorkflowOptions) else options
        if not isinstance(given, dict):
            return data
        for name, info in WORKFLOWS.items():
            if info.builds_on == data.get("workflow") and any(given.get(own) for own in info.own_options()):
                return {**data, "workflow": name}
        return data

    @model_validator(mode="after")
    def _own_options_set(self) -> "JobSpec":
        info = WORKFLOWS.get(self.workflow)
        missing = info.missing_own_option(self.options) if info else None
        if missing:
            raise ValueError(missing)
        return self

    @property
    def info(self) -> ModelInfo:
        return self.model_info or MODELS[self.model]

    @property
    def weights(self) -> str:
        """The weights the job runs: a checkpoint folder, or seeded random weights."""
        return self.model_path or f"random (seed {self.seed})"

    @property
    def job_id(self) -> str:
        """Stable identity: a hash of the canonical JSON of every field except the timeout (a limit, not a setting)."""
        return hashlib.sha256(self._canonical(set()).encode()).hexdigest()[:16]

    @property
    def cell_settings(self) -> str:
        """What makes two runs of a workflow comparable: a hash of everything but the model, workflow, precision and
        batch size (lengths, warm-up, repeats, repetition, device, seed, options, checkpoint). Runs whose settings
        differ are different cells, never compared."""
        return self._settings_hash({"model", "workflow", "precision", "batch_size"})

    @property
    def baseline_settings(self) -> str:
        """cell_settings without the workflow options: the eager run a speedup may use (eager has no options)."""
        return self._settings_hash({"model", "workflow", "precision", "batch_size", "options"})

    def _settings_hash(self, coordinates: set[str]) -> str:
        return hashlib.sha256(self._canonical(coordinates).encode()).hexdigest()[:12]

    def _canonical(self, coordinates: set[str]) -> str:
        """The JSON the hashes read: every field but the timeout and `coordinates`, less the fields (and options)
        added after stores were written while they are unset, so old ids stay valid; a workflow built on another is
        hashed under that one's name, as its jobs were before it had a row."""
        exclude: dict[str, Any] = {name: True for name in ("timeout_s", *coordinates)}
        if self.model_info is None:
            exclude["model_info"] = True
        later = {name: True for name in WorkflowOptions.LATER if getattr(self.options, name) is None}
        if later and "options" not in exclude:
            exclude["options"] = later
        info = WORKFLOWS.get(self.workflow)
        hashed = self.model_copy(update={"workflow": info.builds_on}) if info and info.builds_on else self
        return hashed.model_dump_json(exclude=exclude)

    def label(self) -> str:
        options = self.options.non_default()
        return f"{self.model}/{self.workflow}/{self.precision}/b{self.batch_size}" + (f" [{options}]" if options else "")

    def workflow_label(self) -> str:
        options = self.options.non_default()
        return f"{self.workflow} [{options}]" if options else self.workflow
