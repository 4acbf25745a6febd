from typing import Literal, Optional, Union

from pydantic import Field, model_validator

from mlcbench.schema.base import Name, StrictModel, invalid
from mlcbench.schema.catalog import MODELS, WORKFLOWS, ModelInfo
from mlcbench.schema.jobs import BatchSize, JobSpec, Precision, Repetition, WorkflowName

# an option's value as a suite file or command line gives it; its workflow's options class checks it
OptionValue = Union[bool, int, float, str, None]
SyntheticArchitecture = Literal["matmul", "matmul-relu", "ffn", "ffn-multilayer"]


class ModelDefinition(StrictModel):
    """A suite's own model: an LLM from a Hugging Face config.json (`config`: a folder that holds one, or a model id
    already in the local Hugging Face cache), or a synthetic model by architecture and dims."""

    config: Optional[str] = None
    architecture: Optional[SyntheticArchitecture] = None
    hidden_size: Optional[int] = Field(default=None, ge=1)
    intermediate_size: Optional[int] = Field(default=None, ge=1)
    depth: Optional[int] = Field(default=None, ge=1)
    # None: the config's dtype (LLMs), fp32 (synthetic)
    precision: Optional[Precision] = None

    @model_validator(mode="after")
    def _one_kind(self) -> "ModelDefinition":
        synthetic = (self.architecture, self.hidden_size, self.intermediate_size, self.depth)
        if self.config is not None:
            if any(value is not None for value in synthetic):
                raise invalid("give either config (an LLM) or architecture and dims (a synthetic model), not both")
        elif self.architecture is None or self.hidden_size is None or self.intermediate_size is None:
            raise invalid("give config (a Hugging Face config folder or cached model id) or architecture, "
                          "hidden_size and intermediate_size (a synthetic model)")
        elif self.depth is not None and self.architecture != "ffn-multilayer":
            raise invalid(f"depth is for ffn-multilayer, not {self.architecture}")
        return self

    def synthetic_info(self) -> ModelInfo:
        assert self.architecture is not None and self.hidden_size and self.intermediate_size
        return ModelInfo(kind="synthetic", architecture=self.architecture.replace("-", "_"),
                         hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                         depth=self.depth or (8 if self.architecture == "ffn-multilayer" else 1),
                         default_precision=self.precision or "fp32")


class SuiteEntry(StrictModel):
    """A grid: every model x workflow x batch size, at each model's default precision unless given."""

    models: list[Name] = Field(min_length=1)
    workflows: list[WorkflowName] = Field(min_length=1)
    batch_sizes: list[BatchSize] = Field(min_length=1)
    precision: Optional[Precision] = None
    # each as a job declares it
    input_len: int = JobSpec.setting("input_len")
    output_len: int = JobSpec.setting("output_len")
    warmup: int = JobSpec.setting("warmup")
    repeats: int = JobSpec.setting("repeats")
    repetition: Repetition = JobSpec.setting("repetition")
    timeout_s: float = JobSpec.setting("timeout_s")
    # the options every workflow of the entry reads, by name: each given counts (WorkflowInfo.read_options)
    options: dict[str, OptionValue] = {}

    @model_validator(mode="after")
    def _options_its_workflows_read(self) -> "SuiteEntry":
        for workflow in self.workflows:
            if workflow in WORKFLOWS:
                WORKFLOWS[workflow].read_options(self.options)
        return self


class Suite(StrictModel):
    name: Name
    description: str
    # meant for a GPU: its models and grid would take hours on a CPU, where `--plan` says so
    for_gpu: bool = False
    # the suite's own models by name, beside the catalog's
    models: dict[Name, ModelDefinition] = {}
    entries: list[SuiteEntry] = Field(min_length=1)
    # each of `models` as built from its definition (an LLM's config.json read by the orchestrator, which fills this
    # when it loads a suite; a suite file never sets it): what the jobs carry to the workers
    resolved_models: dict[str, ModelInfo] = {}

    @model_validator(mode="after")
    def _known_models(self) -> "Suite":
        for name in self.models:
            if name in MODELS:
                raise invalid(f"models.{name}: {name!r} is a catalog model; give the suite's own model another name")
        for index, entry in enumerate(self.entries):
            for model in entry.models:
                if model not in MODELS and model not in self.models:
                    raise invalid(f"entries[{index}].models: unknown model {model!r}; neither the catalog's "
                                  f"({', '.join(sorted(MODELS))}) nor one of the suite's [models]")
        return self

    def expand(self, device: str) -> list[JobSpec]:
        jobs: list[JobSpec] = []
        seen: set[str] = set()
        for entry in self.entries:
            for model in entry.models:
                own = self.resolved_models.get(model) if model in self.models else None
                if model in self.models and own is None:
                    raise ValueError(f"model {model!r} of suite {self.name!r} was not resolved from its definition")
                info = own or MODELS[model]
                for workflow in entry.workflows:
                    for batch in entry.batch_sizes:
                        job = JobSpec(
                            model=model, model_info=own, workflow=workflow,
                            precision=entry.precision or info.default_precision,
                            batch_size=batch, input_len=entry.input_len, output_len=entry.output_len,
                            warmup=entry.warmup, repeats=entry.repeats, repetition=entry.repetition, timeout_s=entry.timeout_s,
                            device=device, options=entry.options,
                        )
                        if job.job_id not in seen:
                            seen.add(job.job_id)
                            jobs.append(job)
        return jobs
