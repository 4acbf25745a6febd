"""One sweep: plan per env, store what cannot run, run the rest through the env's runtime, store every result."""

import itertools
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from orchestrator import provenance
from orchestrator.envs import load_env
from orchestrator.gpu import Target
from orchestrator.planner import EnvPlan, Filters, expand, plan_env
from orchestrator.runtimes.base import Runtime, run_jobs
from orchestrator.store import Store
from schema import EnvSpec, JobSpec, Result, Suite


@dataclass
class SweepOptions:
    suite: Suite
    env_names: list[str]
    target: Target
    filters: Filters = Filters()
    rerun: bool = False
    workdir: Path = Path("results/work")
    cache_dir: Path = Path.home() / ".cache" / "mlcbench"


@dataclass
class SweepReport:
    stored: list[Result] = field(default_factory=list)
    skipped: int = 0
    jobs_wall_s: float = 0.0


class SweepListener:
    """Progress callbacks; the CLI draws them, tests and benchmarks may ignore them."""

    def planned(self, to_run: int, skipped: int) -> None: ...

    def job_done(self, result: Result) -> None: ...


def plan(options: SweepOptions, store: Store) -> list[EnvPlan]:
    envs = [load_env(name) for name in options.env_names]
    jobs = expand(options.suite, options.target, options.filters)
    return [plan_env(env, jobs, options.target, store.statuses(env.name, options.target.tag), options.rerun)
            for env in envs]


def run(options: SweepOptions, store: Store, listener: Optional[SweepListener] = None,
        runtime_factory: Optional[Callable[[EnvSpec, SweepOptions], Runtime]] = None) -> SweepReport:
    listener = listener or SweepListener()
    runtime_factory = runtime_factory or make_runtime
    plans = plan(options, store)
    report = SweepReport(skipped=sum(p.skipped for p in plans))
    listener.planned(sum(len(p.to_run) + len(p.unsupported) for p in plans), report.skipped)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    for env_plan in plans:
        env = env_plan.env
        for result in env_plan.unsupported:
            _store(store, report, listener, provenance.finish(result, env.name, options.target.tag, None))
        if not env_plan.to_run:
            continue
        runtime = runtime_factory(env, options)
        try:
            digest = runtime.image_digest()

            def on_result(result: Result) -> None:
                _store(store, report, listener, provenance.finish(result, env.name, options.target.tag, digest))

            for index, group in enumerate(_worker_groups(runtime, env_plan.to_run)):
                begin = time.perf_counter()
                run_jobs(runtime, group, options.workdir / f"{stamp}-{env.name}" / f"group-{index:03d}", on_result)
                report.jobs_wall_s += time.perf_counter() - begin
        finally:
            runtime.close()
    return report


def _store(store: Store, report: SweepReport, listener: SweepListener, result: Result) -> None:
    store.put(result)
    report.stored.append(result)
    listener.job_done(result)


def _worker_groups(runtime: Runtime, jobs: list[JobSpec]) -> list[list[JobSpec]]:
    """Jobs that share one worker: all of them locally; one container per (model, workflow) for isolation."""
    if not runtime.isolate_groups:
        return [jobs]
    ordered = sorted(jobs, key=lambda job: (job.model, job.workflow))
    return [list(group) for _, group in itertools.groupby(ordered, key=lambda job: (job.model, job.workflow))]


def make_runtime(env: EnvSpec, options: SweepOptions) -> Runtime:
    gpu_uuid = options.target.gpus[0].uuid if options.target.gpus else None
    if env.runtime == "local":
        from orchestrator.runtimes.local import LocalRuntime

        pin = {"CUDA_VISIBLE_DEVICES": gpu_uuid} if gpu_uuid else {}
        return LocalRuntime(env, cache_dir=options.cache_dir / env.name, extra_env=pin)
    from orchestrator.runtimes.docker import DockerRuntime

    return DockerRuntime(env, cache_dir=options.cache_dir / env.name, gpu_uuid=gpu_uuid)
