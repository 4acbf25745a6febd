"""A sweep of N jobs handed to Slurm as one array on this single node: what submitting costs, how many connections the
tasks open on the store, and how fast Slurm and the store get through the tasks.

The tasks run the real array-task code (plan file, shared PostgreSQL store, the follower) with simulated workers (each
job takes --job-s and answers ok), so the figures are Slurm's, Python's and the store's, not torch's. The jobs are cut
for N tasks at once (--array-parallelism N): one job per task, the most tasks, store connections and scheduling work a
sweep of N jobs can ask for. Each task then pays a Python start, the mlcbench imports and a store check of its own.

Run (as root on the CI machine, whose single node declares 8 CPUs: 8 tasks at once):
    eval "$(bash .ci/slurm-setup.sh | tail -1)"; eval "$(bash .ci/postgres-setup.sh | tail -1)"
    .venv/bin/python tests/bench/slurm_array.py --jobs 500"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import create_engine, func, select, text

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes import slurm
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.database import ResultRow
from mlcbench.orchestrator.sweep import slurm as slurm_sweep
from mlcbench.schema import Suite, SuiteEntry

MODELS = ["matmul-small", "matmul-relu-small", "ffn-small", "ffn-multilayer-small"]
SAMPLE_S = 0.1


def grid(jobs: int) -> Suite:
    """jobs eager runs: 4 models x jobs / 4 batch sizes."""
    return Suite(name="slurm-scale", description="simulated", entries=[
        SuiteEntry(models=MODELS, workflows=["eager"], batch_sizes=list(range(1, jobs // len(MODELS) + 1)),
                   warmup=0, repeats=1)])


class StoreSampler:
    """Every SAMPLE_S, on one connection of its own: the server connections the sweep's tasks hold (pg_stat_activity:
    those of the benchmark's application name, which the store URL carries to every task) and the rows stored so
    far."""

    def __init__(self, url: str):
        self._engine = create_engine(url, pool_size=1)
        self.connections: list[int] = []
        self.stored: list[tuple[float, int]] = []  # (seconds since start, rows)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> tuple[int, int]:
        with self._engine.connect() as connection:
            others = connection.scalar(text("SELECT count(*) - 1 FROM pg_stat_activity WHERE application_name = "
                                            "current_setting('application_name')"))
            return others, connection.scalar(select(func.count()).select_from(ResultRow))

    def __enter__(self) -> "StoreSampler":
        self._baseline = self._sample()[0]
        self._begin = time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            others, rows = self._sample()
            self.connections.append(others - self._baseline)
            self.stored.append((time.perf_counter() - self._begin, rows))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._engine.dispose()


def running_tasks(array_job_id: str) -> int:
    states = subprocess.run(["squeue", "--noheader", "--array", "--jobs", array_job_id, "--format", "%T"],
                            capture_output=True, text=True).stdout.split()
    return states.count("RUNNING")


def measure(url: str, jobs: int, job_s: float, partition: str, folder: Path) -> list[str]:
    store = Store(url, pooled=False)
    options = sweeping.SweepOptions(suite=grid(jobs), env_names=["local"], target=Target("cpu", "cpu", ()),
                                    workdir=folder / "work", cache_dir=folder / "cache")
    sbatch = slurm.SbatchOptions(partition=partition, array_parallelism=jobs)
    running: list[int] = []
    with StoreSampler(url) as sampler:
        begin = time.perf_counter()
        plan, _ = slurm_sweep.submit(options, store, sbatch,
                               command=lambda path: [sys.executable, __file__, "task", str(path), "--job-s", str(job_s)])
        submitted = time.perf_counter() - begin
        while not sampler.stored or sampler.stored[-1][1] < jobs:
            time.sleep(0.5)
            running.append(running_tasks(plan.array_job_id))
        wall = time.perf_counter() - begin
    plan_bytes = slurm.plan_file(options.workdir, options.sweep_id).stat().st_size
    first = next(seconds for seconds, rows in sampler.stored if rows)
    busy = [count for count in running if count]
    return [
        f"{jobs} jobs -> Slurm array {plan.array_job_id} of {len(plan.tasks)} tasks (one job each), simulated job "
        f"{job_s} s",
        f"  submit (plan against the store, plan file, one sbatch call): {submitted:.2f} s; plan file {plan_bytes:,} "
        f"bytes ({plan_bytes / jobs:,.0f} per job)",
        f"  first result stored after {first:.1f} s, all {jobs} after {wall:.1f} s: {jobs / wall:.2f} tasks/s; "
        f"tasks running at once (squeue every 0.5 s): max {max(busy, default=0)}, mean "
        f"{sum(busy) / max(len(busy), 1):.1f}",
        f"  store connections the tasks held (pg_stat_activity every {SAMPLE_S} s): peak "
        f"{max(sampler.connections, default=0)}, mean {sum(sampler.connections) / max(len(sampler.connections), 1):.2f}",
    ]


def fresh_schema(url: str) -> tuple[str, str]:
    """A schema of its own; its URL also names the connections (application_name), so that other users of the same
    server are not counted."""
    name = f"bench_{uuid.uuid4().hex[:10]}"
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {name}"))
    engine.dispose()
    return name, f"{url}{'&' if '?' in url else '?'}application_name={name}&options=-csearch_path%3D{name}"


def drop_schema(url: str, name: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {name} CASCADE"))
    engine.dispose()


def versions() -> str:
    slurm_version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout.strip()
    engine = create_engine(os.environ["MLCBENCH_TEST_POSTGRES_URL"])
    with engine.connect() as connection:
        postgres = connection.scalar(text("SHOW server_version"))
        max_connections = connection.scalar(text("SHOW max_connections"))
    engine.dispose()
    node = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N CPUs=%c"], capture_output=True,
                          text=True).stdout.strip()
    return (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.node()}: {os.cpu_count()} cores, "
            f"{platform.platform()}; Python {platform.python_version()}; {slurm_version} (node {node}); "
            f"PostgreSQL {postgres} (max_connections {max_connections}); load average before "
            f"{os.getloadavg()[0]:.1f} (other work on the machine)")


def task(plan: Path, job_s: float) -> None:
    slurm_sweep.run_task(plan, int(os.environ["SLURM_ARRAY_TASK_ID"]),
                   runtime_factory=lambda env, options, gpu: SimulatedRuntime(env, seconds=lambda job: job_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "task"])
    parser.add_argument("plan", nargs="?", type=Path)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--job-s", type=float, default=0.5)
    parser.add_argument("--partition", default=os.environ.get("MLCBENCH_TEST_SLURM_PARTITION", "cpu"))
    args = parser.parse_args()
    if args.mode == "task":
        task(args.plan, args.job_s)
        return
    url = os.environ["MLCBENCH_TEST_POSTGRES_URL"]
    print(versions(), flush=True)
    name, schema_url = fresh_schema(url)
    try:
        with tempfile.TemporaryDirectory() as folder:
            for line in measure(schema_url, args.jobs, args.job_s, args.partition, Path(folder)):
                print(line, flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        drop_schema(url, name)


if __name__ == "__main__":
    main()
