"""Sweeps on a Slurm cluster (`mlcbench sweep --runtime slurm`): one job array, no scheduler of our own.

Submitting plans the sweep as on one host (resume, --rerun, unsupported jobs stored at once), cuts the jobs into the
work units a local sweep would share out, writes them to a plan file in a folder every node sees, and calls sbatch
once. Each array task runs its unit as a local sweep would (the env's runtime, the crash-isolating follower, a worker
per GPU Slurm gave it) and stores every result in the shared store as it ends. A task that Slurm stops (scancel, time
limit, node failure, preemption) loses only its job in flight: the next sweep plans only what the store lacks."""

import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.orchestrator.gpu import CPU_TAG, Target, detect, resolve_target
from mlcbench.orchestrator.planner import EnvPlan, is_final, is_partial
from mlcbench.orchestrator.recovery import recover
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.store import Store, safe_url
from mlcbench.schema import GPUS, EnvSpec, GpuInfo, JobSpec, Result, Suite

PLAN_FILE = "plan.json"
JOB_NAME = "mlcbench"
# how many tasks at once the jobs are cut for (guided self-scheduling) when --array-parallelism does not say
DEFAULT_TASKS_AT_ONCE = 16
SLURM_COMMAND_TIMEOUT_S = 60


class SbatchOptions(BaseModel):
    """What the cluster is told about every array task; `extra` passes other sbatch options through as given
    (--account, --qos, --constraint, Pyxis's --container-image ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: Optional[str] = None
    gres: Optional[str] = None
    time: Optional[str] = None
    cpus_per_task: Optional[PositiveInt] = None
    array_parallelism: Optional[PositiveInt] = None
    extra: tuple[str, ...] = ()

    def args(self) -> list[str]:
        given = {"--partition": self.partition, "--gres": self.gres, "--time": self.time,
                 "--cpus-per-task": self.cpus_per_task}
        return [f"{flag}={value}" for flag, value in given.items() if value is not None] + list(self.extra)


class ArrayTask(BaseModel):
    """One array task: a work unit of one env, as a local sweep hands one to a worker."""

    env: str
    jobs: list[JobSpec]


class ArrayPlan(BaseModel):
    """All an array task reads. Written at submission; only its owner may read it, as it names the store."""

    sweep_id: str
    store_url: str
    suite: Suite
    gpu_tag: str
    force_gpu_tag: bool
    rerun: bool
    cache_dir: Path
    tasks: list[ArrayTask]
    array_job_id: Optional[str] = None


def plan_file(workdir: Path, sweep_id: str) -> Path:
    return workdir.resolve() / f"slurm-{sweep_id}" / PLAN_FILE


def load_plan(path: Path) -> ArrayPlan:
    try:
        return ArrayPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no Slurm sweep plan at {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the Slurm sweep plan {path}: {error}") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(f"the Slurm sweep plan {path} is damaged ({error.error_count()} error(s), first: "
                         f"{where + ': ' if where else ''}{first['msg']}); submit the sweep again") from None


def _write_plan(path: Path, plan: ArrayPlan) -> None:
    """Atomically (tasks may be reading it), readable by its owner only."""
    partial = path.with_suffix(".partial")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as handle:
        handle.write(plan.model_dump_json(indent=1))
    os.replace(partial, path)


def catalog_target(tag: str) -> Target:
    """The target as the submitting host sees it: the catalog's GPU for the tag (a login node has none to detect);
    each task checks the tag against the GPUs Slurm gave it."""
    if tag == CPU_TAG:
        return Target(tag=tag, device="cpu", gpus=())
    if tag not in GPUS:
        raise UsageError(f"unknown GPU tag {tag!r}; known: {', '.join([CPU_TAG, *GPUS])}")
    peaks = GPUS[tag]
    return Target(tag=tag, device="cuda", gpus=(GpuInfo(name=peaks.name, compute_capability=peaks.compute_capability),))


def refuse_sqlite(url: str) -> None:
    try:
        backend = make_url(url).get_backend_name()
    except (ArgumentError, ValueError):
        raise UsageError(f"cannot use --db {safe_url(url)}: not a SQLAlchemy URL (e.g. "
                         f"postgresql+psycopg://USER:PASSWORD@HOST/DATABASE)") from None
    if backend == "sqlite":
        raise UsageError("--runtime slurm needs a store that every node reaches, not a SQLite file: pass "
                         "--db postgresql+psycopg://USER:PASSWORD@HOST/DATABASE")


def task_command(path: Path) -> list[str]:
    """What every array task runs: this interpreter, which a cluster's nodes share with its login node."""
    return [sys.executable, "-m", "mlcbench.orchestrator", "slurm-task", str(path)]


def submit(options: sweeping.SweepOptions, store: Store, sbatch: SbatchOptions, force_gpu_tag: bool = False,
           listener: Optional[sweeping.SweepListener] = None,
           command: Callable[[Path], list[str]] = task_command) -> tuple[ArrayPlan, sweeping.SweepReport]:
    """Plan the sweep, hand what can run to Slurm as one array, then store what cannot (a refused submission stores
    nothing). Returns the plan (no tasks and no array when nothing is left to run) and what was stored."""
    refuse_sqlite(store.url)
    if shutil.which("sbatch") is None:
        raise UsageError("--runtime slurm: no sbatch on PATH; submit from a host of the Slurm cluster")
    _refuse_overlap(options)
    planned = sweeping.plan(options, store)
    tasks_at_once = sbatch.array_parallelism or DEFAULT_TASKS_AT_ONCE
    tasks = [ArrayTask(env=p.env.name, jobs=unit) for p in planned
             for unit in sweeping.work_units(_isolates_groups(p.env), p.to_run, tasks_at_once)]
    plan = ArrayPlan(sweep_id=options.sweep_id, store_url=store.url, suite=options.suite, gpu_tag=options.target.tag,
                     force_gpu_tag=force_gpu_tag, rerun=options.rerun, cache_dir=options.cache_dir.resolve(),
                     tasks=tasks)
    if tasks:
        plan = _submit(plan, options, sbatch, command)
    # the unsupported jobs are stored through the one sweep code path, once Slurm has taken the rest
    report = sweeping.run(options, store, listener, plans=[replace(p, to_run=[]) for p in planned])
    return plan, report


def _submit(plan: ArrayPlan, options: sweeping.SweepOptions, sbatch: SbatchOptions,
            command: Callable[[Path], list[str]]) -> ArrayPlan:
    """The plan written where the tasks read it, handed to sbatch; returned with its array's job id."""
    tasks = plan.tasks
    path = plan_file(options.workdir, options.sweep_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_plan(path, plan)
    array = f"0-{len(tasks) - 1}" + (f"%{sbatch.array_parallelism}" if sbatch.array_parallelism else "")
    try:
        submitted = _slurm(["sbatch", "--parsable", f"--array={array}", f"--job-name={JOB_NAME}",
                            f"--output={path.parent / 'task-%a.log'}", f"--chdir={Path.cwd()}", *sbatch.args(),
                            "--wrap", shlex.join(["exec", *command(path)])])
    except (UsageError, EnvironmentFailure):
        shutil.rmtree(path.parent)  # this sweep's own folder, made above: a refused submission leaves nothing
        raise
    plan = plan.model_copy(update={"array_job_id": submitted.strip().split(";")[0]})
    _write_plan(path, plan)
    return plan


def _refuse_overlap(options: sweeping.SweepOptions) -> None:
    """A sweep's jobs that are still queued or running are not in the store yet: submitting the same env and GPU
    again would run them twice."""
    queued = set(_slurm(["squeue", "--noheader", "--name", JOB_NAME, "--format", "%F"]).split())
    for path in options.workdir.resolve().glob(f"slurm-*/{PLAN_FILE}"):
        earlier = load_plan(path)
        if (earlier.array_job_id in queued and earlier.gpu_tag == options.target.tag
                and {task.env for task in earlier.tasks} & set(options.env_names)):
            raise UsageError(f"Slurm array {earlier.array_job_id} (sweep {earlier.sweep_id}) still runs jobs of this "
                             f"env and GPU: follow it with `mlcbench status --workdir {options.workdir} --watch`, "
                             f"or stop it with `scancel {earlier.array_job_id}`, then submit again")


def _isolates_groups(env: EnvSpec) -> bool:
    """Whether the env's runtime gives each (model, workflow) group a worker of its own, asked of its class: the
    submitting host need not be able to start it (no Docker engine on a login node)."""
    from mlcbench.orchestrator.runtimes.docker import DockerRuntime
    from mlcbench.orchestrator.runtimes.local import LocalRuntime

    return (LocalRuntime if env.runtime == "local" else DockerRuntime).isolate_groups


def _slurm(command: list[str]) -> str:
    """A Slurm command's stdout; all it said, on one line, as a UsageError when it refuses, an EnvironmentFailure when
    it does not answer."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SLURM_COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EnvironmentFailure(f"{command[0]} did not answer: {error}") from None
    if done.returncode != 0:
        said = " / ".join(line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip())
        raise UsageError(f"{command[0]} refused (exit code {done.returncode}): {said or 'it said nothing'}")
    return done.stdout


class TaskLog(sweeping.SweepListener):
    """One line per stored result in the task's Slurm output file."""

    def job_done(self, result: Result) -> None:
        reason = f"  {result.reason}" if result.reason and result.status != "ok" else ""
        print(f"{result.status:<11} {result.job.label()}{reason}", flush=True)


def run_task(path: Path, index: int, runtime_factory: Optional[sweeping.RuntimeFactory] = None,
             listener: Optional[sweeping.SweepListener] = None) -> sweeping.SweepReport:
    """Array task `index` of a plan: its jobs not yet done, run as a local sweep runs them, on the GPUs Slurm gave
    it. SIGTERM (scancel, time limit, preemption) drops the job in flight and ends the task."""
    plan = load_plan(path)
    if not 0 <= index < len(plan.tasks):
        raise UsageError(f"array task {index} is not in {path} (tasks 0-{len(plan.tasks) - 1})")
    task = plan.tasks[index]
    store = Store(plan.store_url, pooled=False)
    detected = detect()
    target = resolve_target(plan.gpu_tag, detected, plan.force_gpu_tag, _allocated_gpus() if detected else None)
    options = sweeping.SweepOptions(suite=plan.suite, env_names=[task.env], target=target, rerun=plan.rerun,
                                    workdir=path.parent / f"task-{index:04d}", cache_dir=plan.cache_dir,
                                    sweep_id=plan.sweep_id)
    env = load_env(task.env)
    key = config_key(env)
    recover(options.workdir, store)  # what this task's workers wrote before Slurm killed it, if it ran before
    stop = StopRequest()
    with _stop_on_sigterm(stop):
        return sweeping.run(options, store, listener or TaskLog(), runtime_factory, stop,
                            plans=[_still_due(store, plan, task, env, key)])


def _allocated_gpus() -> Optional[str]:
    """The GPUs Slurm gave this task, as NVML indices: Slurm names them in CUDA_VISIBLE_DEVICES (where cgroups fence
    the node's other GPUs off, NVML sees only these and numbers them from 0, as Slurm does)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES") or None


def _still_due(store: Store, plan: ArrayPlan, task: ArrayTask, env: EnvSpec, env_config_key: str) -> EnvPlan:
    """A task that Slurm runs again (requeued after a node failure or preemption) skips what it tried before, and what
    another sweep finished meanwhile; a cell an earlier sweep left short of its processes goes on from them."""
    ids = [job.job_id for job in task.jobs]
    # a cell this sweep stored only part of (killed between its processes) is topped up, from its own attempt
    own = store.attempts(env=task.env, gpu_tag=plan.gpu_tag, job_id=ids, sweep_id=plan.sweep_id)
    tried = {row.job_id for row, result in own if not is_partial(result)}
    cells = {result.job_id: result for _, result in own} if plan.rerun else {
        result.job_id: result for result in store.cells(env=task.env, gpu_tag=plan.gpu_tag, job_id=ids)}
    due = EnvPlan(env=env, config_key=env_config_key)
    for job in task.jobs:
        stored = cells.get(job.job_id)
        if job.job_id in tried or is_final(stored, env_config_key):
            continue
        due.to_run.append(job)
        if is_partial(stored):
            due.resumed[job.job_id] = stored
    return due


@contextmanager
def _stop_on_sigterm(stop: StopRequest) -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.now.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def task_states(array_job_id: str) -> dict[int, str]:
    """Slurm's state of each array task it still knows: sacct's (where accounting is on), then squeue's (pending tasks
    one by one, and ended ones for the minutes Slurm keeps them, MinJobAge)."""
    states: dict[int, str] = {}
    for command in (["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", array_job_id,
                     "--format", "JobID,State"],
                    ["squeue", "--noheader", "--array", "--states", "all", "--jobs", array_job_id,
                     "--format", "%i|%T"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=SLURM_COMMAND_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode != 0:  # no accounting storage; a job squeue has forgotten
            continue
        for line in done.stdout.splitlines():
            job, _, state = line.partition("|")
            prefix, _, index = job.partition("_")
            if prefix == array_job_id and index.isdigit():
                states[int(index)] = state.split()[0] if state.strip() else "?"
    return states


# Slurm's states of a task that has ended; any other state it names is a task still queued or running
ENDED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                          "BOOT_FAIL", "DEADLINE"})
GONE = "ended"  # what a task is called that Slurm no longer lists


@dataclass(frozen=True)
class TaskProgress:
    index: int
    env: str
    jobs: int
    stored: Counter  # status -> results of this sweep stored for the task's jobs
    slurm: str

    @property
    def active(self) -> bool:
        return self.slurm != GONE and self.slurm not in ENDED_STATES


def progress(plan: ArrayPlan, store: Store) -> list[TaskProgress]:
    """Each task's results in the store (this sweep's) and its state in Slurm."""
    stored = {(row.env, row.job_id): row.status
              for row in store.rows(sweep_id=plan.sweep_id, gpu_tag=plan.gpu_tag)}
    states = task_states(plan.array_job_id) if plan.array_job_id else {}
    return [TaskProgress(index=index, env=task.env, jobs=len(task.jobs),
                         stored=Counter(stored[key] for key in ((task.env, job.job_id) for job in task.jobs)
                                        if key in stored),
                         slurm=states.get(index, GONE))
            for index, task in enumerate(plan.tasks)]
