from typing import Optional

from pydantic import Field

from mlcbench.schema.base import StrictModel
from mlcbench.schema.catalog import MODELS
from mlcbench.schema.jobs import JobSpec, Precision, Repetition, WorkflowOptions


class SuiteEntry(StrictModel):
    """A grid: every model x workflow x batch size, at each model's default precision unless given."""

    models: list[str]
    workflows: list[str]
    batch_sizes: list[int]
    precision: Optional[Precision] = None
    input_len: int = 32
    output_len: int = 32
    warmup: int = 3
    repeats: int = 10
    repetition: Repetition = Repetition()
    timeout_s: float = 1200.0
    options: WorkflowOptions = WorkflowOptions()


class Suite(StrictModel):
    name: str
    description: str
    entries: list[SuiteEntry] = Field(min_length=1)

    def expand(self, device: str) -> list[JobSpec]:
        jobs: list[JobSpec] = []
        seen: set[str] = set()
        for entry in self.entries:
            for model in entry.models:
                for workflow in entry.workflows:
                    for batch in entry.batch_sizes:
                        job = JobSpec(
                            model=model, workflow=workflow,
                            precision=entry.precision or MODELS[model].default_precision,
                            batch_size=batch, input_len=entry.input_len, output_len=entry.output_len,
                            warmup=entry.warmup, repeats=entry.repeats, repetition=entry.repetition, timeout_s=entry.timeout_s,
                            device=device, options=entry.options,
                        )
                        if job.job_id not in seen:
                            seen.add(job.job_id)
                            jobs.append(job)
        return jobs
