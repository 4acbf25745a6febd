"""`mlcbench sweep --plan`: what a sweep would run and how long it should take, before anything is paid."""

from typing import Optional

from rich.markup import escape
from rich.table import Table

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli.console import console, format_duration
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.database import sqlite_file
from mlcbench.orchestrator.sweep import schedule

# the longest cells listed one by one; the rest are counted
LISTED = 25


def existing_store(db: str) -> Optional[Store]:
    """The store as it is, opened without creating or migrating anything (None: a SQLite file not there yet)."""
    path = sqlite_file(db)
    if path is not None and not path.exists():
        return None
    return Store(db, create=False)


def print_plan(options: sweeping.SweepOptions, db: str) -> None:
    store = existing_store(db)
    options.estimator = schedule.Estimator.from_results(store.cells(gpu_tag=options.target.tag) if store else [])
    lanes = max(len(options.target.gpus), 1)
    shared = f", {options.overlap} processes at once on each" if options.overlap > 1 else ""
    table = Table(title=f"plan: suite {escape(options.suite.name)} on {escape(options.target.tag)}, {lanes} "
                        f"GPU(s){shared}" if options.target.gpus else f"plan: suite {escape(options.suite.name)} on "
                        f"the CPU{shared}")
    for column in ("env", "model", "workflow", "batch", "processes", "estimate"):
        table.add_column(column, justify="right" if column in ("batch", "processes", "estimate") else "left")
    loads = [0.0] * lanes
    listed = unlisted = unsupported = skipped = processes = 0
    for env_plan in sweeping.plan(options, store):
        unsupported += len(env_plan.unsupported)
        skipped += env_plan.skipped
        due = {job.job_id: env_plan.processes_due(job) for job in env_plan.to_run}
        estimates = {job.job_id: options.estimator.cell_s(job, due[job.job_id], cold_first=env_plan.cold_first(job))
                     for job in env_plan.to_run}
        processes += sum(due[job.job_id] + schedule.cold_processes(job, env_plan.cold_first(job))
                         for job in env_plan.to_run)
        windows = {job.job_id: options.estimator.cell_window_s(job, due[job.job_id], env_plan.cold_first(job))
                   for job in env_plan.to_run}
        for lane, seconds in enumerate(schedule.simulate(schedule.groups(env_plan.to_run, estimates, {}, windows),
                                                         lanes, options.overlap)):
            loads[lane] += seconds
        for job in sorted(env_plan.to_run, key=lambda job: estimates[job.job_id], reverse=True):
            if listed < LISTED:
                table.add_row(env_plan.env.name, escape(job.model), escape(job.workflow_label()), str(job.batch_size),
                    str(due[job.job_id]), format_duration(estimates[job.job_id]))
                listed += 1
            else:
                unlisted += 1
    console.print(table)
    if unlisted:
        console.print(f"… and {unlisted} shorter cell(s)")
    console.print(f"{listed + unlisted} cell(s) to run in about {processes} worker process(es); {unsupported} "
                  f"stored `unsupported` at once; {skipped} already final (skipped)", highlight=False)
    console.print(f"estimated wall time: {format_duration(max(loads))} on {lanes} GPU(s){shared} "
                  f"(per GPU: {', '.join(format_duration(load) for load in loads)}); estimates from "
                  f"{'the store' if options.estimator.history else 'typical costs'}"
                  f"{' where it has the cell' if options.estimator.history else ''}; nothing was run or written",
                  highlight=False)
    if options.suite.for_gpu and options.target.device == "cpu":
        console.print(f"warning: suite {escape(options.suite.name)} is meant for a GPU: on this CPU it runs for the "
                      f"time above and stores its GPU workflows `unsupported`; the CPU's suite is `smoke`",
                      highlight=False)
