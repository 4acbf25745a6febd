"""Sweeps handed to Slurm: what `sweep --runtime slurm` prints, `mlcbench status` (a submitted array's progress), and
the hidden `slurm-task` command each array task runs."""

import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from mlcbench.orchestrator import sweep as sweeping, workdirs
from mlcbench.orchestrator.cli.console import ProgressListener, console, exits_cleanly
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.runtimes import slurm
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep import slurm as slurm_sweep

WATCH_EVERY_S = 2.0


def submit_sweep(options: sweeping.SweepOptions, store: Store, sbatch: slurm.SbatchOptions,
                 force_gpu_tag: bool) -> None:
    with ProgressListener() as listener:
        plan, report = slurm_sweep.submit(options, store, sbatch, force_gpu_tag, listener)
    if report.skipped:
        console.print(f"{report.skipped} job(s) skipped: already stored for this env and GPU (--rerun to run again)")
    if not plan.tasks:
        console.print("nothing to submit")
        return
    jobs = sum(len(task.jobs) for task in plan.tasks)
    console.print(f"submitted {jobs} job(s) as Slurm array {plan.array_job_id} of {len(plan.tasks)} task(s), sweep "
                  f"{plan.sweep_id}; results go to {store.safe_url}\n"
                  f"follow it: mlcbench status --workdir {options.workdir} --watch")


def status(
    workdir: Annotated[Path, typer.Option(help="the --workdir the sweep was submitted with (default: any store's "
                                               "default one)")] = workdirs.ROOT,
    sweep: Annotated[Optional[str], typer.Option(help="sweep id (default: the latest submitted from --workdir)")] = None,
    watch: Annotated[bool, typer.Option(help="refresh until every task has ended")] = False,
) -> None:
    """A Slurm sweep's progress: each array task's results in the store and its state in Slurm."""
    path = slurm.plan_file(workdir, sweep) if sweep else _latest_plan(workdir)
    plan = slurm.load_plan(path)
    store = Store(plan.store_url, pooled=False)
    tasks, shown = slurm.progress(plan, store), None
    while watch and any(task.active for task in tasks):
        if _summary(tasks) != shown:
            shown = _summary(tasks)
            console.print(shown, highlight=False)
        time.sleep(WATCH_EVERY_S)
        tasks = slurm.progress(plan, store)
    console.print(_table(plan, tasks))
    console.print(_summary(tasks), highlight=False)
    console.print(f"each task's log: {path.parent}/task-INDEX.log", highlight=False)


def _latest_plan(workdir: Path) -> Path:
    # a sweep's default --workdir is its store's folder under workdirs.ROOT
    plans = sorted([*workdir.glob(f"slurm-*/{slurm.PLAN_FILE}"), *workdir.glob(f"*/slurm-*/{slurm.PLAN_FILE}")],
                   key=lambda path: path.stat().st_mtime)
    if not plans:
        raise UsageError(f"no Slurm sweep submitted from --workdir {workdir}")
    return plans[-1]


def _table(plan: slurm.ArrayPlan, tasks: list[slurm.TaskProgress]) -> Table:
    table = Table(title=f"sweep {plan.sweep_id}, Slurm array {plan.array_job_id}")
    for name, justify in [("task", "right"), ("env", "left"), ("jobs", "right"), ("stored", "right"),
                          ("statuses", "left"), ("slurm", "left")]:
        table.add_column(name, justify=justify)
    for task in tasks:
        table.add_row(str(task.index), task.env, str(task.jobs), str(sum(task.stored.values())),
                      _counts(task.stored), task.slurm)
    return table


def _summary(tasks: list[slurm.TaskProgress]) -> str:
    stored = sum((task.stored for task in tasks), Counter())
    jobs = sum(task.jobs for task in tasks)
    states = Counter(task.slurm for task in tasks)
    return (f"{sum(stored.values())}/{jobs} job(s) stored ({_counts(stored) or 'none yet'}); "
            f"{len(tasks)} task(s): {_counts(states)}")


def _counts(counter: Counter) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counter.items()))


def slurm_task(
    plan: Annotated[Path, typer.Argument(help="the sweep's plan file")],
    index: Annotated[Optional[int], typer.Option(envvar="SLURM_ARRAY_TASK_ID", help="array task index")] = None,
) -> None:
    """Run one array task of a Slurm sweep (what sbatch runs on a node)."""
    if index is None:
        raise UsageError("no array task index: run by Slurm (SLURM_ARRAY_TASK_ID) or pass --index")
    report = slurm_sweep.run_task(plan, index)
    if report.interrupted:
        raise typer.Exit(143)


def register(app: typer.Typer) -> None:
    app.command()(exits_cleanly(status))
    app.command("slurm-task", hidden=True)(exits_cleanly(slurm_task))
