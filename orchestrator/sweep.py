"""One sweep: plan per env, store what cannot run, run the rest through one runtime per GPU at once (one worker
thread each, sharing the jobs through a queue), store every result as it arrives."""

import itertools
import math
import queue
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import EnvPlan, Filters, expand, plan_env
from mlcbench.orchestrator.runtimes.base import Runtime, StopRequest
from mlcbench.orchestrator.runtimes.follower import run_jobs
from mlcbench.orchestrator.store import Store, record
from mlcbench.schema import OWN_WORKER_WORKFLOWS, EnvSpec, GpuInfo, JobSpec, Result, Suite
from mlcbench.schema.protocol import new_sweep_id

JOIN_POLL_S = 0.2


@dataclass
class SweepOptions:
    suite: Suite
    env_names: list[str]
    target: Target
    filters: Filters = Filters()
    rerun: bool = False
    workdir: Path = Path("results/work")
    cache_dir: Path = Path.home() / ".cache" / "mlcbench"
    # model -> a Hugging Face checkpoint folder to load instead of random weights
    checkpoints: dict[str, Path] = field(default_factory=dict)
    # tags the stored rows and the sweep's workers (container labels) alike
    sweep_id: str = field(default_factory=new_sweep_id)


@dataclass
class SweepReport:
    stored: list[Result] = field(default_factory=list)
    skipped: int = 0
    # set when a stop request ended the sweep before every planned job had a result
    interrupted: bool = False


class SweepListener:
    """Progress callbacks; the CLI draws them, tests and benchmarks may ignore them."""

    def planned(self, to_run: int, skipped: int) -> None: ...

    def job_started(self, job: JobSpec) -> None: ...

    def job_done(self, result: Result) -> None: ...


RuntimeFactory = Callable[[EnvSpec, SweepOptions, Optional[GpuInfo]], Runtime]


def plan(options: SweepOptions, store: Store) -> list[EnvPlan]:
    envs = [load_env(name) for name in options.env_names]
    jobs = expand(options.suite, options.target, options.filters, options.checkpoints)
    cells = {env.name: {r.job_id: r for r in store.cells(env=env.name, gpu_tag=options.target.tag)} for env in envs}
    return [plan_env(env, jobs, options.target, cells[env.name], options.rerun, config_key(env)) for env in envs]


def run(options: SweepOptions, store: Store, listener: Optional[SweepListener] = None,
        runtime_factory: Optional[RuntimeFactory] = None, stop: Optional[StopRequest] = None,
        plans: Optional[list[EnvPlan]] = None) -> SweepReport:
    """plans: what to run when already planned (a Slurm array task runs its share of a sweep planned at submission)."""
    listener = listener or SweepListener()
    runtime_factory = runtime_factory or make_runtime
    stop = stop or StopRequest()
    plans = plan(options, store) if plans is None else plans
    report = SweepReport(skipped=sum(p.skipped for p in plans))
    listener.planned(sum(len(p.to_run) + len(p.unsupported) for p in plans), report.skipped)
    writer = _ResultWriter(store, report, listener, options.sweep_id, {p.env.name: p.config_key for p in plans})
    for env_plan in plans:
        env = env_plan.env
        for result in env_plan.unsupported:
            writer.put(result, env.name, options.target.tag, None)
        if not env_plan.to_run or stop.requested:
            continue
        _run_env(env, env_plan.to_run, options, runtime_factory, writer, stop, options.workdir / f"{options.sweep_id}-{env.name}")
    report.interrupted = stop.requested
    return report


class _ResultWriter:
    """Stores results from every worker thread, one at a time (a transaction each), in the order they arrive."""

    def __init__(self, store: Store, report: SweepReport, listener: SweepListener, sweep_id: str,
                 config_keys: dict[str, str]):
        self._store, self._report, self._listener, self._sweep_id = store, report, listener, sweep_id
        self._config_keys = config_keys
        self._lock = threading.Lock()

    def put(self, result: Result, env: str, gpu_tag: str, image_digest: Optional[str]) -> None:
        with self._lock:
            stored = record(self._store, result, env, gpu_tag, image_digest, self._sweep_id, self._config_keys[env])
            self._report.stored.append(stored)
            self._listener.job_done(stored)

    def started(self, job: JobSpec) -> None:
        with self._lock:
            self._listener.job_started(job)


def _run_env(env: EnvSpec, jobs: list[JobSpec], options: SweepOptions, runtime_factory: RuntimeFactory,
             writer: _ResultWriter, stop: StopRequest, workdir: Path) -> None:
    """One worker thread per GPU (one in all on a CPU), each with its own runtime, taking work units from a queue."""
    runtimes: list[tuple[Optional[GpuInfo], Runtime]] = []
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []
    try:
        for gpu in options.target.gpus or (None,):
            runtimes.append((gpu, runtime_factory(env, options, gpu)))
        units: queue.SimpleQueue[tuple[int, list[JobSpec]]] = queue.SimpleQueue()
        for index, unit in enumerate(work_units(runtimes[0][1].isolate_groups, jobs, len(runtimes))):
            units.put((index, unit))
        for gpu, runtime in runtimes:
            thread = threading.Thread(target=_worker_loop, name=f"worker-gpu{gpu.index if gpu else '-'}", daemon=True,
                                      args=(env, gpu, runtime, units, options, writer, stop, workdir, errors))
            thread.start()
            threads.append(thread)
        for thread in threads:
            while thread.is_alive():  # a timed join keeps the main thread responsive to Ctrl-C
                thread.join(JOIN_POLL_S)
    finally:
        if any(thread.is_alive() for thread in threads):  # interrupted at once: the workers' jobs are dropped
            stop.now.set()
            for thread in threads:
                thread.join()
        for _, runtime in runtimes:
            runtime.close()
    if errors:
        raise errors[0]


def _worker_loop(env: EnvSpec, gpu: Optional[GpuInfo], runtime: Runtime, units: "queue.SimpleQueue",
                 options: SweepOptions, writer: _ResultWriter, stop: StopRequest, workdir: Path,
                 errors: list[BaseException]) -> None:
    digest = runtime.image_digest()

    def on_result(result: Result) -> None:
        writer.put(_on_gpu(result, gpu), env.name, options.target.tag, digest)

    try:
        while not stop.requested:
            try:
                index, unit = units.get_nowait()
            except queue.Empty:
                return
            run_jobs(runtime, unit, workdir / f"unit-{index:03d}", on_result, stop=stop, on_start=writer.started)
    except BaseException as error:  # the main thread re-raises it; the other workers stop at once
        errors.append(error)
        stop.now.set()


def _on_gpu(result: Result, gpu: Optional[GpuInfo]) -> Result:
    """The host's record of the GPU it pinned the worker to wins over the worker's (whose indices are relative to its
    visible devices); what only the worker knows (clocks, driver) is kept."""
    if gpu is None:
        return result
    seen = result.provenance.gpu
    merged = gpu if seen is None else seen.model_copy(update={
        name: value for name, value in gpu.model_dump().items() if value is not None})
    return result.model_copy(update={"provenance": result.provenance.model_copy(update={"gpu": merged})})


def work_units(isolate_groups: bool, jobs: list[JobSpec], workers: int) -> list[list[JobSpec]]:
    """How jobs are shared out: one container per (model, workflow) group where the runtime isolates groups, else
    chunks of shrinking size (guided self-scheduling: each takes 1/workers of the jobs left), so that few worker
    start-ups are paid and GPUs that finish early take over the short last chunks; the jobs of a workflow that takes
    over its process (OWN_WORKER_WORKFLOWS) get a worker of their own. Largest first."""
    if isolate_groups:
        ordered = sorted(jobs, key=lambda job: (job.model, job.workflow))
        units = [list(group) for _, group in itertools.groupby(ordered, key=lambda job: (job.model, job.workflow))]
        return sorted(units, key=len, reverse=True)
    shared = [job for job in jobs if job.workflow not in OWN_WORKER_WORKFLOWS]
    own = sorted((job for job in jobs if job.workflow in OWN_WORKER_WORKFLOWS), key=lambda job: job.workflow)
    units = [list(group) for _, group in itertools.groupby(own, key=lambda job: job.workflow)]
    start = 0
    while start < len(shared):
        size = math.ceil((len(shared) - start) / workers)
        units.append(shared[start:start + size])
        start += size
    return sorted(units, key=len, reverse=True)


@contextmanager
def stop_on_sigint(stop: StopRequest, on_first: Callable[[], None] = lambda: None) -> Iterator[None]:
    """The first Ctrl-C (or SIGTERM) asks for a stop after the jobs in flight, and on_first says so; the second stops
    at once (KeyboardInterrupt)."""

    def handle(signum, frame) -> None:
        if stop.after_job.is_set():
            stop.now.set()
            raise KeyboardInterrupt
        stop.after_job.set()
        on_first()

    previous = {signum: signal.signal(signum, handle) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def make_runtime(env: EnvSpec, options: SweepOptions, gpu: Optional[GpuInfo]) -> Runtime:
    gpu_uuid = gpu.uuid if gpu else None
    if env.runtime == "local":
        from mlcbench.orchestrator.runtimes.local import LocalRuntime

        pin = {"CUDA_VISIBLE_DEVICES": gpu_uuid} if gpu_uuid else {}
        return LocalRuntime(env, cache_dir=options.cache_dir / env.name, extra_env=pin)
    from mlcbench.orchestrator.runtimes.docker import DockerRuntime

    return DockerRuntime(env, cache_dir=options.cache_dir / env.name, sweep_id=options.sweep_id, gpu_uuid=gpu_uuid)
