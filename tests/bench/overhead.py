"""What a sweep costs beyond the jobs themselves on the local runtime, in two parts measured apart: the start-up of a
worker process (the host launches it -> it begins its first job: interpreter, imports, torch) and the orchestrator's
own overhead (wall time when no worker process runs: planning, reading results, storing them, launching the next);
over N trivial jobs (eager matmul-small on the CPU, batch sizes 1..N, one process each, no warm-up, one repeat).

The worker imports torch inside its first job (not in its start-up): a fresh process per job pays it in every job,
which the last line derives from the two scopes' job times (a difference of medians, not asserted).

A real sweep: the `local` env's runtime, a SQLite store and work folders in a temporary directory, with each
--worker-scope: `cell` starts a worker process per job, `round` one for all. Every time is read per process, never from
a stored cell (whose start and end span all its processes): the host's clock when it launches each worker, the worker's
own start and end of each job (one machine, one clock). A worker's span runs from its launch to the end of its last
job; the orchestrator's overhead is the sweep's wall time outside every worker's span, so it cannot be negative, nor
can a start-up (asserted). Target: orchestrator overhead under 50 ms per job.

Run: .venv/bin/python tests/bench/overhead.py [--jobs 20]"""

import argparse
import os
import platform
import statistics
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import torch

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Repetition, Result, Suite, SuiteEntry

TARGET_MS = 50.0


def trivial_suite(jobs: int) -> Suite:
    return Suite(name="overhead", description="trivial jobs", entries=[
        SuiteEntry(models=["matmul-small"], workflows=["eager"], batch_sizes=list(range(1, jobs + 1)), warmup=0,
                   repeats=1, repetition=Repetition(processes=1))])


class Processes(sweeping.SweepListener):
    """Each worker process's result as it arrives (its own start and end of the job)."""

    def __init__(self) -> None:
        self.results: list[Result] = []

    def process_done(self, result: Result) -> None:
        self.results.append(result)


def measure(jobs: int, scope: str) -> tuple[list[str], list[float]]:
    """The lines to print, and the jobs' own times (s) in job order."""
    launches: list[datetime] = []

    def runtime_factory(env, options, gpu):
        runtime = sweeping.make_runtime(env, options, gpu)
        start_worker = runtime.start_worker

        def timed(files):
            launches.append(datetime.now(timezone.utc))
            return start_worker(files)

        runtime.start_worker = timed
        return runtime

    listener = Processes()
    with tempfile.TemporaryDirectory() as folder:
        options = sweeping.SweepOptions(suite=trivial_suite(jobs), env_names=["local"],
                                        target=Target(tag="cpu", device="cpu", gpus=()), worker_scope=scope,
                                        workdir=Path(folder) / "work", cache_dir=Path(folder) / "cache")
        store = Store(f"sqlite:///{Path(folder) / 'store.db'}")
        began = datetime.now(timezone.utc)
        sweeping.run(options, store, listener, runtime_factory=runtime_factory)
        ended = datetime.now(timezone.utc)
        stored = len(store.rows(status="ok"))
    results = sorted(listener.results, key=lambda result: result.provenance.started_at)
    assert len(results) == stored == jobs and {result.status for result in results} == {"ok"}, (len(results), stored)
    # each job to the worker launched last before it began
    workers: list[list[Result]] = [[] for _ in launches]
    for result in results:
        workers[max(i for i, launch in enumerate(launches) if launch <= result.provenance.started_at)].append(result)
    spans, startups, own, inside = [], [], [], []
    for launch, done in zip(launches, workers):
        if not done:
            continue
        startup = (done[0].provenance.started_at - launch).total_seconds()
        span = (launch, max(result.provenance.ended_at for result in done))
        times = [(result.provenance.ended_at - result.provenance.started_at).total_seconds() for result in done]
        assert startup >= 0 and all(time >= 0 for time in times) and began <= span[0] <= span[1] <= ended
        spans.append(span)
        startups.append(startup)
        own.extend(times)
        inside.append((span[1] - span[0]).total_seconds() - startup - sum(times))
    covered, reach = timedelta(0), began
    for start, end in sorted(spans):  # the union of the workers' spans
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    wall = (ended - began).total_seconds()
    overhead = wall - covered.total_seconds()
    assert overhead >= 0 and all(gap >= -1e-6 for gap in inside)
    per_job_ms = overhead / jobs * 1000
    return [
        f"--worker-scope {scope}: {jobs} jobs, {len(spans)} worker process(es), sweep wall time {wall:.2f} s",
        f"  worker start-up (launch -> its first job begins): median {statistics.median(startups):.2f} s, "
        f"{sum(startups):.1f} s in all",
        f"  jobs' own time (inside the worker): median {statistics.median(own) * 1000:.0f} ms, {sum(own):.1f} s in all "
        f"(the first job of a worker imports torch)",
        f"  inside the workers between jobs: {sum(inside):.2f} s",
        f"  orchestrator overhead (no worker running: plan, read and store results, launch the next): "
        f"{overhead:.2f} s, {per_job_ms:.1f} ms per job  target < {TARGET_MS:g} ms: "
        f"{'PASS' if per_job_ms < TARGET_MS else 'ABOVE'}",
    ], own


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 4096:
        parser.error("--jobs must be 1..4096")
    print(f"# tests/bench/overhead.py on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: {platform.platform()}, "
          f"{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), Python {platform.python_version()}, "
          f"torch {torch.__version__}", flush=True)
    own = {}
    for scope in ("cell", "round"):
        lines, own[scope] = measure(args.jobs, scope)
        for line in lines:
            print(line, flush=True)
    # the worker imports torch inside its first job: a fresh process per job pays that import in every job
    fresh, warm = statistics.median(own["cell"]), statistics.median(own["round"][1:] or own["round"])
    print(f"derived: a job in a fresh worker process took {fresh - warm:.2f} s longer inside the worker than in a warm "
          f"one (medians {fresh:.2f} s and {warm:.2f} s: torch's import and the first call's set-up), on top of the "
          f"start-up above", flush=True)


if __name__ == "__main__":
    main()
