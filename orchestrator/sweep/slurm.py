"""Sweeps on a Slurm cluster (`mlcbench sweep --runtime slurm`): one job array, no scheduler of our own.

Submitting plans the sweep as on one host (resume, --rerun, unsupported jobs stored at once), cuts the jobs into the
work units a local sweep would share out, writes them to a plan file in a folder every node sees, and calls sbatch
once (runtimes/slurm.py). Each array task runs its unit as a local sweep would (the env's runtime, the
crash-isolating follower, a worker per GPU Slurm gave it) and stores every result in the shared store as it ends. A
task that Slurm stops (scancel, time limit, node failure, preemption) loses only its job in flight: the next sweep
plans only what the store lacks."""

import os
import signal
import shutil
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.gpu import detect, resolve_target
from mlcbench.orchestrator.planner import EnvPlan, is_partial, still_due, this_machine
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.runtimes.registry import runtime_class
from mlcbench.orchestrator.runtimes import slurm
from mlcbench.orchestrator.runtimes.slurm import ArrayPlan, ArrayTask, SbatchOptions, task_command
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep.recovery import recover
from mlcbench.schema import EnvSpec, Result


def submit(options: sweeping.SweepOptions, store: Store, sbatch: SbatchOptions, force_gpu_tag: bool = False,
           listener: Optional[sweeping.SweepListener] = None,
           command: Callable[[Path], list[str]] = task_command) -> tuple[ArrayPlan, sweeping.SweepReport]:
    """Plan the sweep, hand what can run to Slurm as one array, then store what cannot (a refused submission stores
    nothing). Returns the plan (no tasks and no array when nothing is left to run) and what was stored."""
    slurm.refuse_sqlite(store.url)
    if shutil.which("sbatch") is None:
        raise UsageError("--runtime slurm: no sbatch on PATH; submit from a host of the Slurm cluster")
    slurm.refuse_overlap(options.workdir, options.target.tag, options.env_names)
    planned = sweeping.plan(options, store)
    tasks_at_once = sbatch.array_parallelism or slurm.DEFAULT_TASKS_AT_ONCE
    tasks = [ArrayTask(env=p.env.name, jobs=unit) for p in planned
             for unit in sweeping.work_units(runtime_class(p.env).isolate_groups, p.to_run, tasks_at_once)]
    plan = ArrayPlan(sweep_id=options.sweep_id, store_url=store.url, suite=options.suite, gpu_tag=options.target.tag,
                     force_gpu_tag=force_gpu_tag, rerun=options.rerun, cache_dir=options.cache_dir.resolve(),
                     tasks=tasks)
    if tasks:
        plan = slurm.submit_array(plan, options.workdir, sbatch, command)
    # the unsupported jobs are stored through the one sweep code path, once Slurm has taken the rest
    report = sweeping.run(options, store, listener, plans=[replace(p, to_run=[]) for p in planned])
    return plan, report


class TaskLog(sweeping.SweepListener):
    """One line per stored result in the task's Slurm output file."""

    def job_done(self, result: Result) -> None:
        reason = f"  {result.reason}" if result.reason and result.status != "ok" else ""
        print(f"{result.status:<11} {result.job.label()}{reason}", flush=True)


def run_task(path: Path, index: int, runtime_factory: Optional[sweeping.RuntimeFactory] = None,
             listener: Optional[sweeping.SweepListener] = None) -> sweeping.SweepReport:
    """Array task `index` of a plan: its jobs not yet done, run as a local sweep runs them, on the GPUs Slurm gave
    it. SIGTERM (scancel, time limit, preemption) drops the job in flight and ends the task."""
    plan = slurm.load_plan(path)
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
                            plans=[_due(store, plan, task, env, key)])


def _due(store: Store, plan: ArrayPlan, task: ArrayTask, env: EnvSpec, env_config_key: str) -> EnvPlan:
    """A task that Slurm runs again (requeued after a node failure or preemption) skips what it tried before, and what
    another sweep finished meanwhile; a cell an earlier sweep left short of its processes goes on from them."""
    ids = [job.job_id for job in task.jobs]
    # a cell this sweep stored only part of (killed between its processes) is topped up, from its own attempt
    own = store.attempts(env=task.env, gpu_tag=plan.gpu_tag, job_id=ids, sweep_id=plan.sweep_id)
    tried = {row.job_id for row, result in own if not is_partial(result)}
    cells = {result.job_id: result for _, result in own} if plan.rerun else {
        result.job_id: result for result in store.cells(env=task.env, gpu_tag=plan.gpu_tag, job_id=ids)}
    return still_due(env, task.jobs, cells, env_config_key, this_machine(), tried)


def _allocated_gpus() -> Optional[str]:
    """The GPUs Slurm gave this task, as NVML indices: Slurm names them in CUDA_VISIBLE_DEVICES (where cgroups fence
    the node's other GPUs off, NVML sees only these and numbers them from 0, as Slurm does)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES") or None


@contextmanager
def _stop_on_sigterm(stop: StopRequest) -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.now.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
