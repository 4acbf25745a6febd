"""Slurm's side of a sweep on a cluster (`mlcbench sweep --runtime slurm`; the sweep's side: sweep/slurm.py): the plan
file every array task reads, the one sbatch call that submits the array, and what Slurm says of its tasks."""

import os
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from mlcbench.orchestrator.errors import EnvironmentFailure, UsageError
from mlcbench.orchestrator.gpu import CPU_TAG, Target
from mlcbench.orchestrator.store import Store, safe_url
from mlcbench.schema import GPUS, GpuInfo, JobSpec, Suite

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


def submit_array(plan: ArrayPlan, workdir: Path, sbatch: SbatchOptions,
                 command: Callable[[Path], list[str]] = task_command) -> ArrayPlan:
    """The plan written where the tasks read it, handed to sbatch; returned with its array's job id."""
    tasks = plan.tasks
    path = plan_file(workdir, plan.sweep_id)
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


def refuse_overlap(workdir: Path, gpu_tag: str, env_names: list[str]) -> None:
    """A sweep's jobs that are still queued or running are not in the store yet: submitting the same env and GPU
    again would run them twice."""
    queued = set(_slurm(["squeue", "--noheader", "--name", JOB_NAME, "--format", "%F"]).split())
    for path in workdir.resolve().glob(f"slurm-*/{PLAN_FILE}"):
        earlier = load_plan(path)
        if (earlier.array_job_id in queued and earlier.gpu_tag == gpu_tag
                and {task.env for task in earlier.tasks} & set(env_names)):
            raise UsageError(f"Slurm array {earlier.array_job_id} (sweep {earlier.sweep_id}) still runs jobs of this "
                             f"env and GPU: follow it with `mlcbench status --workdir {workdir} --watch`, "
                             f"or stop it with `scancel {earlier.array_job_id}`, then submit again")


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
