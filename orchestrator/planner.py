"""Suite + filters + envs + target -> what to run, what cannot run (with the reason), and what is already done."""

from dataclasses import dataclass, field
from typing import Optional, Sequence

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.gpu import Target
from mlcbench.schema import FINAL_STATUSES, MODELS, WORKFLOWS, EnvSpec, JobSpec, Result, Suite


@dataclass
class EnvPlan:
    env: EnvSpec
    to_run: list[JobSpec] = field(default_factory=list)
    unsupported: list[Result] = field(default_factory=list)
    skipped: int = 0


@dataclass(frozen=True)
class Filters:
    models: Sequence[str] = ()
    workflows: Sequence[str] = ()
    batch_sizes: Sequence[int] = ()

    def validate(self) -> None:
        for model in self.models:
            if model not in MODELS:
                raise UsageError(f"unknown model {model!r}; known: {', '.join(sorted(MODELS))}")
        for workflow in self.workflows:
            if workflow not in WORKFLOWS:
                raise UsageError(f"unknown workflow {workflow!r}; known: {', '.join(WORKFLOWS)}")

    def keep(self, job: JobSpec) -> bool:
        return ((not self.models or job.model in self.models)
                and (not self.workflows or job.workflow in self.workflows)
                and (not self.batch_sizes or job.batch_size in self.batch_sizes))


def expand(suite: Suite, target: Target, filters: Filters) -> list[JobSpec]:
    filters.validate()
    jobs = [job for job in suite.expand(target.device) if filters.keep(job)]
    if not jobs:
        raise UsageError(f"the filters leave no job of suite {suite.name!r} to run")
    return jobs


def plan_env(env: EnvSpec, jobs: list[JobSpec], target: Target, done: dict[str, str], rerun: bool) -> EnvPlan:
    """done: job_id -> stored status for this env and GPU tag."""
    plan = EnvPlan(env=env)
    blocked = _env_blocked(env, target)
    for job in jobs:
        if not rerun and done.get(job.job_id) in FINAL_STATUSES:
            plan.skipped += 1
            continue
        reason = blocked or (None if env.provides(job.workflow) else
                             f"{env.name} env does not provide {job.workflow} (env.toml workflows)")
        if reason:
            plan.unsupported.append(Result.without_run(job, "unsupported", reason))
        else:
            plan.to_run.append(job)
    return plan


def _env_blocked(env: EnvSpec, target: Target) -> Optional[str]:
    if target.device != "cuda":
        return None
    capability = target.gpus[0].compute_capability or "?"
    if env.runtime == "docker" and not env.can_target(capability):
        cuda = f"CUDA {env.cuda}" if env.cuda else "its toolchain"
        arch = f"sm_{capability.replace('.', '')}"
        return f"{env.name} env: {cuda} cannot target {arch} ({target.gpus[0].name})"
    return None
