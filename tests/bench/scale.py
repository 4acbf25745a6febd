"""How sweep wall time falls with the number of GPUs, and what a Docker worker costs to start.

1. Scaling: the real sweep (queue, worker threads, result following, SQLite store) over N = 1, 2, 4, 8 simulated GPUs
   whose workers take a known time per job; prints the parallel efficiency T1 / (N x TN) (target: >= 0.9 at N = 8), for
   the local runtime's sharing (chunks of jobs) and the docker runtime's (one worker per (model, workflow) group).
   Time is compressed 150 x: a 0.2 s job, 0.02 s worker start-up and 0.33 ms result polling stand for a 30 s job, a 3 s
   start-up (interpreter + torch import) and the orchestrator's real 50 ms polling.
2. Docker: a real sweep of the `tiny` suite in the `cpu` env's containers, when an engine and the image are there;
   prints the container start (start request -> the worker's first job begins; target < 1.5 s) and the whole overhead
   per container (container wall time minus the jobs' own time: start, interpreter and torch import, removal).

Run: PYTHONPATH=. python tests/bench/scale.py [--jobs 64] [--job-s 0.2] [--startup-s 0.02] [--poll-s 0.00033]"""

import argparse
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.base import WorkerFiles
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.suites import get_suite
from mlcbench.schema import GpuInfo, Suite, SuiteEntry

GPU_COUNTS = (1, 2, 4, 8)
MODELS = ["matmul-small", "matmul-relu-small", "ffn-small", "ffn-multilayer-small"]


def grid(jobs: int) -> Suite:
    """jobs = 4 models x 4 batch sizes x W workflows: 4 W (model, workflow) groups of 4 jobs."""
    workflows = [f"wf{index}" for index in range(max(1, jobs // 16))]
    return Suite(name="scale", description="simulated", entries=[
        SuiteEntry(models=MODELS, workflows=workflows, batch_sizes=[1, 2, 4, 8], warmup=0, repeats=1)])


def sweep_seconds(gpus: int, suite: Suite, job_s: float, startup_s: float, poll_s: float, isolate_groups: bool,
                  folder: Path) -> float:
    target = Target(tag="h100", device="cpu", gpus=tuple(
        GpuInfo(name="NVIDIA H100 80GB HBM3", uuid=f"GPU-sim-{index}", index=index) for index in range(gpus)))
    options = sweeping.SweepOptions(suite=suite, env_names=["local"], target=target, workdir=folder / "work")
    store = Store(f"sqlite:///{folder / 'store.db'}")
    begin = time.perf_counter()
    report = sweeping.run(options, store, runtime_factory=lambda env, _options, _gpu: SimulatedRuntime(
        env, seconds=lambda job: job_s, startup_s=startup_s, isolate_groups=isolate_groups, poll_s=poll_s))
    wall = time.perf_counter() - begin
    assert len(report.stored) == len(store.rows()) == len(suite.expand("cpu"))
    return wall


def scaling(jobs: int, job_s: float, startup_s: float, poll_s: float) -> list[str]:
    suite = grid(jobs)
    count = len(suite.expand("cpu"))
    lines = [f"scaling: {count} simulated jobs of {job_s} s each, worker start-up {startup_s} s, result polling "
             f"every {poll_s * 1000:g} ms (real sweep code, SQLite store)"]
    for label, isolate in (("local (chunks)", False), ("docker (groups)", True)):
        walls: dict[int, float] = {}
        for gpus in GPU_COUNTS:
            with tempfile.TemporaryDirectory() as folder:
                walls[gpus] = sweep_seconds(gpus, suite, job_s, startup_s, poll_s, isolate, Path(folder))
        for gpus, wall in walls.items():
            lines.append(f"  {label:<16} N={gpus}  T={wall:6.2f} s  efficiency T1/(N*TN) = "
                         f"{walls[1] / (gpus * wall):.3f}")
    return lines


class _TimedDocker:
    """Wraps the docker runtime: notes when each worker container was asked for."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.started: dict[Path, datetime] = {}

    def __getattr__(self, name):
        return getattr(self.runtime, name)

    def start_worker(self, files: WorkerFiles):
        self.started[files.folder] = datetime.now(timezone.utc)
        return self.runtime.start_worker(files)


def docker_overhead() -> list[str]:
    try:
        from mlcbench.orchestrator.envs import load_env
        from mlcbench.orchestrator.envs.images import connect, find_image

        client = connect()
        if find_image(client, load_env("cpu"), None) is None:
            return ["docker: skipped (no image of the cpu env's files: mlcbench build cpu)"]
    except UsageError as error:
        return [f"docker: skipped ({error})"]
    timed: list[_TimedDocker] = []

    def factory(env, options, gpu) -> _TimedDocker:
        timed.append(_TimedDocker(sweeping.make_runtime(env, options, gpu)))
        return timed[-1]

    with tempfile.TemporaryDirectory() as folder:
        options = sweeping.SweepOptions(suite=get_suite("tiny"), env_names=["cpu"], target=Target("cpu", "cpu", ()),
                                        workdir=Path(folder) / "work", cache_dir=Path(folder) / "cache")
        store = Store(f"sqlite:///{Path(folder) / 'store.db'}")
        begin = time.perf_counter()
        report = sweeping.run(options, store, runtime_factory=factory)
        wall = time.perf_counter() - begin
        starts, overheads = [], []
        for worker_folder, asked in timed[0].started.items():
            ids = [line.strip() for line in (worker_folder / "progress.txt").read_text().splitlines()]
            results = [r for r in report.stored if r.job_id in ids]
            first = min(r.provenance.started_at for r in results)
            last = max(r.provenance.ended_at for r in results)
            starts.append((first - asked).total_seconds())
            jobs_s = sum((r.provenance.ended_at - r.provenance.started_at).total_seconds() for r in results)
            overheads.append((last - asked).total_seconds() - jobs_s)
    statuses = sorted({r.status for r in report.stored})
    return [f"docker: tiny suite in the cpu env, {len(report.stored)} jobs in {len(starts)} containers, "
            f"{wall:.1f} s in all (statuses: {', '.join(statuses)})",
            f"  container start (request -> first job begins): mean {sum(starts) / len(starts):.2f} s, "
            f"max {max(starts):.2f} s (target < 1.5 s)",
            f"  overhead per container outside its jobs (start request -> last job ends, minus the jobs' own time): "
            f"mean {sum(overheads) / len(overheads):.2f} s, i.e. {sum(overheads) / len(report.stored):.2f} s per job "
            f"amortised over {len(report.stored) / len(starts):.0f} jobs"]


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--job-s", type=float, default=0.2)
    parser.add_argument("--startup-s", type=float, default=0.02)
    parser.add_argument("--poll-s", type=float, default=0.05 / 150)
    args = parser.parse_args(argv)
    for line in [*scaling(args.jobs, args.job_s, args.startup_s, args.poll_s), *docker_overhead()]:
        print(line, flush=True)


if __name__ == "__main__":
    main()
