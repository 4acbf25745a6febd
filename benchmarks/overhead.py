"""The orchestrator's overhead per job on the local runtime: sweep wall time minus the jobs' own time, over N trivial
jobs (eager matmul-small on the CPU, batch sizes 1..N, no warmup, one repeat); target: under 50 ms per job.

A real sweep: the `local` env's runtime (one `python -m workers` subprocess for all jobs), a SQLite store and work
folders in a temporary directory. The jobs' own time is what the worker records per job (ended_at - started_at). The
local runtime starts one worker for all jobs, so the overhead is given with and without its start-up (sweep start ->
the first job begins). The worker imports torch inside its first job, so that import counts as the first job's time;
the figure with it moved to the start-up (estimated as the first job minus the median job) is printed too.

Run: .venv/bin/python benchmarks/overhead.py [--jobs 50]"""

import argparse
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import torch

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Suite, SuiteEntry

TARGET_MS = 50.0


def trivial_suite(jobs: int) -> Suite:
    return Suite(name="overhead", description="trivial jobs", entries=[
        SuiteEntry(models=["matmul-small"], workflows=["eager"], batch_sizes=list(range(1, jobs + 1)), warmup=0,
                   repeats=1)])


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args(argv)
    if not 2 <= args.jobs <= 4096:  # batch sizes 1..N tell the jobs apart; the first job is set apart from the rest
        parser.error("--jobs must be 2..4096")
    print(f"# benchmarks/overhead.py on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: {platform.platform()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        options = sweeping.SweepOptions(suite=trivial_suite(args.jobs), env_names=["local"],
                                        target=Target(tag="cpu", device="cpu", gpus=()),
                                        workdir=Path(folder) / "work", cache_dir=Path(folder) / "cache")
        store = Store(f"sqlite:///{Path(folder) / 'store.db'}")
        started = datetime.now(timezone.utc)
        begin = time.perf_counter()
        report = sweeping.run(options, store)
        wall = time.perf_counter() - begin
        ended = datetime.now(timezone.utc)
        stored = len(store.rows())
    results = report.stored
    statuses = sorted({result.status for result in results})
    assert len(results) == stored == args.jobs and statuses == ["ok"], (len(results), stored, statuses)
    starts = [r.provenance.started_at for r in results]
    ends = [r.provenance.ended_at for r in results]
    own = [(end - start).total_seconds() for start, end in zip(starts, ends)]
    gaps = [(start - end).total_seconds() for start, end in zip(starts[1:], ends)]
    startup = (starts[0] - started).total_seconds()
    torch_import = own[0] - statistics.median(own[1:])
    overhead = wall - sum(own)
    per_job_ms = overhead / args.jobs * 1000
    verdict = "PASS" if per_job_ms < TARGET_MS else "ABOVE"
    for line in [
        f"jobs: {args.jobs} (eager matmul-small, cpu, warmup 0, repeats 1), one local worker, statuses: ok",
        f"sweep wall time: {wall:.3f} s",
        f"jobs' own time: {sum(own):.3f} s (first job {own[0] * 1000:.0f} ms, with the worker's torch import; "
        f"the others median {statistics.median(own[1:]) * 1000:.1f} ms)",
        f"worker start-up (sweep start -> first job begins): {startup:.3f} s",
        f"between jobs (one ends -> the next begins, in the worker): mean {statistics.mean(gaps) * 1000:.1f} ms; "
        f"last job ends -> sweep returns: {(ended - ends[-1]).total_seconds() * 1000:.0f} ms",
        f"overhead per job including worker start-up: {per_job_ms:.1f} ms  target < {TARGET_MS:g} ms: {verdict}",
        f"overhead per job excluding worker start-up: {(overhead - startup) / args.jobs * 1000:.1f} ms",
        f"overhead per job with the torch import (~{torch_import:.2f} s) counted as start-up, not job time: "
        f"{(overhead + torch_import) / args.jobs * 1000:.1f} ms",
    ]:
        print(line, flush=True)


if __name__ == "__main__":
    main()
