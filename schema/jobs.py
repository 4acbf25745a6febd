import hashlib
from copy import copy
from typing import Annotated, Any, Literal, Optional

from pydantic import (AfterValidator, Field, SerializeAsAny, StrictInt, ValidationInfo, field_validator,
                      model_validator)

from mlcbench.schema.base import SCHEMA_VERSION, StrictModel, invalid
from mlcbench.schema.catalog import FAULT_WORKFLOWS, MODELS, WORKFLOWS, ModelInfo
from mlcbench.schema.legacy import RETIRED_REPETITION, RetiredRepetition, hashed_json
from mlcbench.schema.options import NoOptions, Options

Precision = Literal["fp32", "fp16", "bf16"]
# strict: a job or suite file's 1e3 or true is refused, not run as batch 1000 or 1
BatchSize = Annotated[int, Field(ge=1, le=4096, strict=True)]


def known_workflow(name: str) -> str:
    """The name, where it is a workflow of the catalog (or a fault workflow of the tests); else an error naming the
    known ones."""
    if name not in WORKFLOWS and name not in FAULT_WORKFLOWS:
        raise invalid(f"unknown workflow {name!r}; known: {', '.join(WORKFLOWS)}")
    return name


# a workflow of the catalog (or a fault workflow of the tests), wherever a name of one enters: job, suite entry
WorkflowName = Annotated[str, AfterValidator(known_workflow)]


class Repetition(StrictModel):
    """How often a cell is measured: in `processes` fresh worker processes (the unit of repetition) of one program
    (orchestrator/planner.py processes_due), a count fixed before any is timed. `target` is the interval half-width a
    cell's figure counts as converged at."""

    processes: int = Field(default=3, ge=1, le=100)
    target: float = Field(default=0.02, gt=0, lt=1)

    @model_validator(mode="before")
    @classmethod
    def _no_retired_knob(cls, data: Any) -> Any:
        """A knob of the adaptive rule of earlier versions is an error naming what replaces it, never ignored."""
        if isinstance(data, dict):
            for name, replacement in RETIRED_REPETITION.items():
                if name in data:
                    raise invalid(f"{name}: {replacement}")
        return data


class _CatalogModel(StrictModel):
    model: str

    @field_validator("model")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in MODELS:
            raise invalid(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
        return name


class JobSpec(StrictModel):
    """One measurement: a model, run through one workflow, at one precision and batch size. Its fields are the one
    declaration of each setting's default and bounds, which suite entries and the command line read (setting)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    model: str
    workflow: WorkflowName
    precision: Precision
    batch_size: BatchSize
    input_len: StrictInt = Field(default=32, ge=1, le=8192)
    output_len: StrictInt = Field(default=32, ge=1, le=8192)
    warmup: StrictInt = Field(default=3, ge=0, le=1000)
    repeats: StrictInt = Field(default=10, ge=1, le=10000)
    repetition: Repetition = Repetition()
    timeout_s: float = Field(default=1200.0, gt=0, le=86400)
    device: Literal["cuda", "cpu"] = "cuda"
    seed: int = 0
    # the workflow's own options class (WorkflowInfo.options)
    options: SerializeAsAny[Options] = Field(default_factory=NoOptions, validate_default=True)
    # A local Hugging Face checkpoint folder for LLMs; random weights from the model's config when None.
    model_path: Optional[str] = None
    # A suite's own model, carried whole so that a worker in any container can build it; None for the catalog's
    # models (and then left out of the job's identity, so that their job ids do not change)
    model_info: Optional[ModelInfo] = None
    # only a job read from an older store that set them (schema/legacy.py): kept so that its job id stays
    retired_repetition: Optional[RetiredRepetition] = None

    @model_validator(mode="before")
    @classmethod
    def _known_model(cls, data: Any) -> Any:
        """A model the catalog has, or one the job carries; the error names the field, as a field's own would."""
        if isinstance(data, dict) and data.get("model_info") is None:
            _CatalogModel.model_validate({"model": data.get("model")})  # its error is located at "model"
        return data

    @field_validator("options", mode="before")
    @classmethod
    def _its_workflows_own(cls, options: Any, info: ValidationInfo) -> Any:
        """The options as the workflow's own class (WorkflowInfo.read_options: each one given counts); a fault
        workflow of the tests reads none."""
        workflow = info.data.get("workflow")
        if workflow is None:
            return NoOptions()  # the workflow's own error says what is wrong
        given = options.model_dump(exclude_unset=True) if isinstance(options, Options) else options
        if not isinstance(given, dict):
            return options
        row = WORKFLOWS.get(workflow)
        return row.read_options(given) if row is not None else NoOptions.model_validate(given)

    @staticmethod
    def setting(name: str) -> Any:
        """A setting's field as JobSpec declares it (default, bounds, strictness), for a model that takes it too."""
        return copy(JobSpec.model_fields[name])

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
        """The JSON the hashes read: every field but `coordinates`, in the shape stores were first written in, so
        that old ids stay valid (schema/legacy.py)."""
        return hashed_json(self.model_dump(mode="json"), coordinates)

    def label(self) -> str:
        options = self.options.non_default()
        return f"{self.model}/{self.workflow}/{self.precision}/b{self.batch_size}" + (f" [{options}]" if options else "")

    def workflow_label(self) -> str:
        options = self.options.non_default()
        return f"{self.workflow} [{options}]" if options else self.workflow
