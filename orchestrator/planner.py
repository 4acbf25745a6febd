"""Suite + filters + envs + target -> what to run, what cannot run (with the reason), and what is already done."""

import functools
import importlib.util
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Mapping, Optional, Sequence

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.gpu import Target, detect
from mlcbench.orchestrator.suites import builtin_names, check_checkpoint, check_workflow_option, get_suite
from mlcbench.schema import (FINAL_STATUSES, MODELS, WORKFLOWS, EnvSpec, GpuInfo, JobSpec, ProcessTiming, Result, Suite,
                             why_not_run)
from mlcbench.schema.catalog import missing_requirements


@dataclass
class EnvPlan:
    env: EnvSpec
    # what decided the env's `unsupported` results (envs.config_key), stored with each result
    config_key: str
    to_run: list[JobSpec] = field(default_factory=list)
    # job_id -> the stored result of a cell that a stopped sweep left short of its processes: the cell goes on from it
    resumed: dict[str, Result] = field(default_factory=dict)
    # cells whose stored result is a failure (a crash, a timeout ...): tried again, after every other cell, so that a
    # resume spends its time on what was never measured before what failed last time
    retried: set[str] = field(default_factory=set)
    unsupported: list[Result] = field(default_factory=list)
    skipped: int = 0

    def processes_due(self, job: JobSpec) -> int:
        """The worker processes the job's cell still needs at the least."""
        resumed = self.resumed.get(job.job_id)
        return processes_due(job, stored_processes(resumed) if resumed is not None else [])

    def cold_first(self, job: JobSpec) -> bool:
        """The cell's next process is its first on this machine (its caches hold nothing of it): no stored process
        of the cell goes on here (still_due, Machine)."""
        return job.job_id not in self.resumed


@dataclass(frozen=True)
class Filters:
    models: Sequence[str] = ()
    workflows: Sequence[str] = ()
    batch_sizes: Sequence[int] = ()

    def validate(self, suite: Suite) -> None:
        for model in self.models:
            if model not in MODELS and model not in suite.models:
                raise UsageError(f"--model: unknown model {model!r}; known: {', '.join(sorted([*MODELS, *suite.models]))}")
        check_workflow_option(self.workflows)

    def keep(self, job: JobSpec) -> bool:
        return ((not self.models or job.model in self.models)
                and (not self.workflows or job.workflow in self.workflows)
                and (not self.batch_sizes or job.batch_size in self.batch_sizes))


def expand(suite: Suite, target: Target, filters: Filters,
           checkpoints: Optional[Mapping[str, Path]] = None) -> list[JobSpec]:
    """The suite's jobs that pass the filters; an LLM named in checkpoints loads that Hugging Face folder instead of
    random weights (a different cell: model_path is part of the job), once its config is found to be that model's."""
    filters.validate(suite)
    suite_jobs = suite.expand(target.device)
    for label, attribute, values in (("model", "model", filters.models), ("workflow", "workflow", filters.workflows),
                                     ("batch size", "batch_size", filters.batch_sizes)):
        for value in values:
            if not _has(suite_jobs, attribute, value):
                having = [name for name in builtin_names() if _has(get_suite(name).expand(target.device), attribute, value)]
                where = f"suites that have it: {', '.join(having)}" if having else "no suite has it"
                raise UsageError(f"{label} {value!r} is not in suite {suite.name!r} ({where}); pick another --suite "
                                 f"or drop it from the filter")
    jobs = [job for job in suite_jobs if filters.keep(job)]
    if not jobs:
        raise UsageError(f"the filters leave no job of suite {suite.name!r} to run")
    swept = {job.model: job.info for job in jobs}
    folders = {model: str(check_checkpoint(model, folder, swept)) for model, folder in (checkpoints or {}).items()}
    return [job.model_copy(update={"model_path": folders[job.model]}) if job.model in folders else job
            for job in jobs]


# signals a worker dies of when the code it runs faults (not SIGKILL, which the OOM killer and users send)
FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT})


def is_final(result: Optional[Result], config_key: str) -> bool:
    """Another run would only repeat it: ok, or unsupported under the same configuration (an env.toml typo fixed, or a
    library installed, is worth another try), or a worker killed by a fault signal under the same configuration (on
    four H200s a resume ran 32 aot_inductor cells again, each segfaulting after ≈ 45 s of GPU time: --rerun asks)."""
    if result is not None and result.status == "crashed":
        return crashed_on_a_fault(result) and result.provenance.config_key == config_key
    if result is None or result.status not in FINAL_STATUSES:
        return False
    if result.status == "ok":
        return measured_in_full(result)
    return result.provenance.config_key == config_key


def crashed_on_a_fault(result: Result) -> bool:
    return result.exit_code is not None and -result.exit_code in FAULT_SIGNALS


def measured_in_full(result: Result) -> bool:
    """Its processes are all there: not a cell that a stopped sweep stored with what it had measured so far, or one
    that lost a process (a crash after others ran: the next sweep tops it up)."""
    latency = result.metrics.latency
    if latency is None or not latency.processes:
        return True
    return processes_due(result.job, stored_processes(result)) == 0


def is_partial(result: Optional[Result]) -> bool:
    """An ok cell short of its processes: the next sweep goes on from it."""
    return result is not None and result.status == "ok" and not measured_in_full(result)


def stored_processes(result: Result) -> list[ProcessTiming]:
    """Every ok process of a stored cell, in both series."""
    latency = result.metrics.latency
    return [*latency.processes, *latency.other_series] if latency is not None else []


@dataclass(frozen=True)
class Machine:
    """Where a sweep runs: its host's name and its GPUs' UUIDs. Lent machines may share a name (every GPU machine of
    one workplace was "vm"), never a GPU."""

    host: str
    gpu_uuids: frozenset[str]

    def ran(self, process: ProcessTiming) -> bool:
        """The process ran here (a process of an older store, which did not record where, counts as here)."""
        return process.host in (None, self.host) and (process.gpu_uuid is None or process.gpu_uuid in self.gpu_uuids)


@functools.lru_cache(maxsize=1)
def this_machine(gpus: Optional[Sequence[GpuInfo]] = None) -> Machine:
    """This host with its GPUs: those given (a sweep's target), else those it detects."""
    gpus = detect() if gpus is None else gpus
    return Machine(socket.gethostname(), frozenset(gpu.uuid for gpu in gpus if gpu.uuid))


def ran_here(processes: Sequence[ProcessTiming], machine: Machine) -> bool:
    """Some of the processes ran on this machine, where its compiler caches stay. A cell whose processes all ran on
    another machine (a sweep resumed in a later session on a fresh one) starts a new attempt here, whose first process
    compiles again (cells.CellAttempt: a cell never mixes GPUs or hosts)."""
    return any(machine.ran(process) for process in processes)


def processes_due(job: JobSpec, processes: Sequence[ProcessTiming]) -> int:
    """The worker processes a cell still needs: a fixed count per suite (job.repetition.processes) of one program,
    decided before any is timed (stopping when the interval happens to look tight would bias it). The program is the
    warm one (processes that found their compiled graphs in the cache, or compiled nothing), or the cold one where
    the processes keep compiling into an empty cache: a cell's first, cold, process comes on top of the count."""
    cold = sum(process.compile_cache == "cold" for process in processes)
    return max(0, job.repetition.processes - max(cold, len(processes) - cold))


def _has(jobs: list[JobSpec], attribute: str, value: object) -> bool:
    return any(getattr(job, attribute) == value for job in jobs)


def plan_env(env: EnvSpec, jobs: list[JobSpec], target: Target, done: dict[str, Result], rerun: bool,
             config_key: str, machine: Machine) -> EnvPlan:
    """done: job_id -> the result of each stored cell of this env and GPU tag; machine: where the sweep runs."""
    plan = still_due(env, jobs, {} if rerun else done, config_key, machine)
    blocked = _env_blocked(env, target)
    runnable = []
    for job in plan.to_run:
        reason = why_not_run(job.workflow, job.info) or blocked or (
            None if env.provides(job.workflow) else f"{env.name} env does not provide {job.workflow} (env.toml workflows)"
        ) or (_not_importable_here(job.workflow) if env.runtime == "local" else None)
        if reason:
            plan.unsupported.append(Result.without_run(job, "unsupported", reason))
            plan.resumed.pop(job.job_id, None)
            continue
        runnable.append(job)
    plan.to_run = runnable
    return plan


def still_due(env: EnvSpec, jobs: list[JobSpec], done: dict[str, Result], config_key: str, machine: Machine,
              tried: Collection[str] = ()) -> EnvPlan:
    """What of jobs is due: all but those whose stored cell (done: job_id -> result) is final, and those tried (a
    requeued Slurm task skips what it tried before); a cell left short of its processes goes on from them."""
    plan = EnvPlan(env=env, config_key=config_key)
    for job in jobs:
        stored = done.get(job.job_id)
        if job.job_id in tried or is_final(stored, config_key):
            plan.skipped += 1
            continue
        plan.to_run.append(job)
        if is_partial(stored) and ran_here(stored_processes(stored), machine):
            plan.resumed[job.job_id] = stored
        elif stored is not None and stored.status not in FINAL_STATUSES:
            plan.retried.add(job.job_id)
    return plan


def _not_importable_here(workflow: str) -> Optional[str]:
    """A local env's worker runs in this interpreter: a workflow whose packages it cannot find is unsupported without
    starting a worker to say so (looked up, not imported)."""
    info = WORKFLOWS.get(workflow)
    missing = [package for package in (info.requires if info else ()) if not _findable(package)]
    return missing_requirements(workflow, missing) if missing else None


def _findable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _env_blocked(env: EnvSpec, target: Target) -> Optional[str]:
    if target.device != "cuda":
        return None
    capability = target.gpus[0].compute_capability or "?"
    if env.runtime == "docker" and not env.can_target(capability):
        cuda = f"CUDA {env.cuda}" if env.cuda else "its toolchain"
        arch = f"sm_{capability.replace('.', '')}"
        return f"{env.name} env: {cuda} cannot target {arch} ({target.gpus[0].name})"
    return None
