"""One sweep: plan per env, store what cannot run, run the rest through one runtime per GPU at once (one worker
thread each, sharing the jobs through a queue), store every result as it arrives."""

import itertools
import math
import queue
import random
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import EnvPlan, Filters, expand, plan_env, processes_measured
from mlcbench.orchestrator.runtimes.base import Runtime, StopRequest
from mlcbench.orchestrator.runtimes.follower import run_jobs
from mlcbench.orchestrator.store import Store, record
from mlcbench.orchestrator import stats
from mlcbench.schema import OWN_WORKER_WORKFLOWS, Calibration, EnvSpec, GpuInfo, JobSpec, Result, Suite, Timing
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR, new_sweep_id

JOIN_POLL_S = 0.2


@dataclass
class SweepOptions:
    suite: Suite
    env_names: list[str]
    target: Target
    filters: Filters = Filters()
    rerun: bool = False
    workdir: Path = Path("results/work")
    cache_dir: Path = DEFAULT_CACHE_DIR
    # model -> a Hugging Face checkpoint folder to load instead of random weights
    checkpoints: dict[str, Path] = field(default_factory=dict)
    # tags the stored rows and the sweep's workers (container labels) alike
    sweep_id: str = field(default_factory=new_sweep_id)
    # seeds the order of the cells in each round (stored with every result)
    order_seed: int = field(default_factory=lambda: random.randrange(1 << 31))


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

    def round_started(self, index: int, cells: int) -> None: ...

    def process_done(self, result: Result) -> None:
        """One worker process's result for a cell (a cell's Result is stored after its last process: job_done)."""

    def job_done(self, result: Result) -> None: ...


RuntimeFactory = Callable[[EnvSpec, SweepOptions, Optional[GpuInfo]], Runtime]
# for a GPU: where its measured ceilings go, the first time it is asked in a sweep; None after that
Calibrator = Callable[[Optional[GpuInfo]], Optional[Callable[[Calibration], None]]]


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
    # progress is counted in worker processes: each cell's minimum, and one for each result stored without one
    listener.planned(sum(p.processes_due(job) for p in plans for job in p.to_run)
                     + sum(len(p.unsupported) for p in plans), report.skipped)
    writer = _ResultWriter(store, report, listener, options.sweep_id, {p.env.name: p.config_key for p in plans})
    for env_plan in plans:
        env = env_plan.env
        for result in env_plan.unsupported:
            listener.process_done(result)
            writer.put(result, env.name, options.target.tag, None)
        if not env_plan.to_run or stop.requested:
            continue
        _run_env(env, env_plan, options, runtime_factory, writer, listener, stop,
                 options.workdir / f"{options.sweep_id}-{env.name}")
    report.interrupted = stop.requested
    return report


class _ResultWriter:
    """Stores results from every worker thread, one at a time (a transaction each), in the order they arrive."""

    def __init__(self, store: Store, report: SweepReport, listener: SweepListener, sweep_id: str,
                 config_keys: dict[str, str]):
        self._store, self._report, self._listener, self._sweep_id = store, report, listener, sweep_id
        self._config_keys = config_keys
        self.lock = threading.RLock()
        self._calibrated: set[str] = set()  # GPU UUIDs ("cpu") whose ceilings this sweep has measured

    def claim_calibration(self, gpu: Optional[GpuInfo]) -> bool:
        """True once per GPU per sweep: the caller measures that GPU's ceilings."""
        key = (gpu.uuid or "?") if gpu else "cpu"
        with self.lock:
            if key in self._calibrated:
                return False
            self._calibrated.add(key)
            return True

    def put_calibration(self, calibration: Calibration, env: str, gpu_tag: str) -> None:
        with self.lock:
            self._store.put_calibration(calibration.model_copy(update={
                "env": env, "gpu_tag": gpu_tag, "sweep_id": self._sweep_id}))

    def put(self, result: Result, env: str, gpu_tag: str, image_digest: Optional[str]) -> None:
        with self.lock:
            stored = record(self._store, result, env, gpu_tag, image_digest, self._sweep_id, self._config_keys[env])
            self._report.stored.append(stored)
            self._listener.job_done(stored)

    def started(self, job: JobSpec) -> None:
        with self.lock:
            self._listener.job_started(job)


def _run_env(env: EnvSpec, env_plan: EnvPlan, options: SweepOptions, runtime_factory: RuntimeFactory,
             writer: _ResultWriter, listener: SweepListener, stop: StopRequest, workdir: Path) -> None:
    """The cells of one env in rounds: each round runs every cell that wants another process once, in a fresh worker,
    the cells in an order shuffled per round, so that drift (clocks, heat, the host) hits every workflow alike. One
    worker thread per GPU (one in all on a CPU), each with its own runtime, takes work units from a queue. A cell an
    earlier, stopped sweep left short of its processes starts from the processes it stored."""
    runtimes: list[tuple[Optional[GpuInfo], Runtime]] = []
    try:
        for gpu in options.target.gpus or (None,):
            runtimes.append((gpu, runtime_factory(env, options, gpu)))
        digests = {id(runtime): runtime.image_digest() for _, runtime in runtimes}
        cells = {job.job_id: _Cell(job, options.order_seed, env_plan.resumed.get(job.job_id))
                 for job in env_plan.to_run}
        for round_index in itertools.count():
            due = [cell.job for cell in cells.values() if cell.wants_process()]
            if not due or stop.requested:
                break
            order = list(due)
            random.Random(f"{options.order_seed}:{env.name}:{round_index}").shuffle(order)
            positions = {job.job_id: position for position, job in enumerate(order)}
            listener.round_started(round_index, len(order))

            def on_result(result: Result, gpu: Optional[GpuInfo], runtime: Runtime) -> None:
                cell = cells[result.job_id]
                with writer.lock:
                    listener.process_done(result)
                    cell.add(_on_gpu(result, gpu), round_index, positions[result.job_id], digests[id(runtime)])
                    done = not cell.wants_process()
                if done:
                    writer.put(cell.result(), env.name, options.target.tag, cell.digest)

            def calibrator(gpu: Optional[GpuInfo]) -> Optional[Callable[[Calibration], None]]:
                if not writer.claim_calibration(gpu):
                    return None
                return lambda calibration: writer.put_calibration(calibration, env.name, options.target.tag)

            units = work_units(runtimes[0][1].isolate_groups, order, len(runtimes))
            _run_units(runtimes, units, on_result, calibrator, writer.started, stop,
                       workdir / f"round-{round_index:02d}")
        # a stopped sweep keeps what it measured: a cell short of its processes is stored as it stands (its interval
        # wider, or none), and the next sweep adds the processes it lacks (planner.measured_in_full)
        for cell in cells.values():
            if not cell.stored and (cell.ok or cell.lost is not None):
                writer.put(cell.result(), env.name, options.target.tag, cell.digest)
    finally:
        for _, runtime in runtimes:
            runtime.close()


def _run_units(runtimes: list[tuple[Optional[GpuInfo], Runtime]], units: list[list[JobSpec]],
               on_result: Callable[[Result, Optional[GpuInfo], Runtime], None], calibrator: Calibrator,
               on_start: Callable[[JobSpec], None], stop: StopRequest, workdir: Path) -> None:
    queued: queue.SimpleQueue[tuple[int, list[JobSpec]]] = queue.SimpleQueue()
    for index, unit in enumerate(units):
        queued.put((index, unit))
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []
    try:
        for gpu, runtime in runtimes:
            thread = threading.Thread(target=_worker_loop, name=f"worker-gpu{gpu.index if gpu else '-'}", daemon=True,
                                      args=(gpu, runtime, queued, on_result, calibrator, on_start, stop, workdir,
                                            errors))
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
    if errors:
        raise errors[0]


def _worker_loop(gpu: Optional[GpuInfo], runtime: Runtime, units: "queue.SimpleQueue",
                 on_result: Callable[[Result, Optional[GpuInfo], Runtime], None], calibrator: Calibrator,
                 on_start: Callable[[JobSpec], None], stop: StopRequest, workdir: Path,
                 errors: list[BaseException]) -> None:
    try:
        while not stop.requested:
            try:
                index, unit = units.get_nowait()
            except queue.Empty:
                return
            run_jobs(runtime, unit, workdir / f"unit-{index:03d}", lambda result: on_result(result, gpu, runtime),
                     stop=stop, on_start=on_start, on_calibration=calibrator(gpu))
    except BaseException as error:  # the main thread re-raises it; the other workers stop at once
        errors.append(error)
        stop.now.set()


class _Cell:
    """The processes of one cell so far, and the one Result they make."""

    def __init__(self, job: JobSpec, order_seed: int, resumed: Optional[Result] = None):
        self.job, self.order_seed = job, order_seed
        self.ok: list[Result] = [resumed] if resumed is not None else []
        self.lost: Optional[Result] = None  # the first process that did not end ok; no more processes after it
        self.digest: Optional[str] = None
        self.stored = False

    def add(self, result: Result, round_index: int, position: int, digest: Optional[str]) -> None:
        self.digest = digest
        if result.status != "ok":
            self.lost = result
            return
        latency = result.metrics.latency
        if latency is not None:
            placed = [process.model_copy(update={"round": round_index, "position": position,
                                                 "compile_s": result.metrics.compile_s,
                                                 "compile_cache": result.metrics.compile_cache})
                      for process in latency.processes]
            result = result.model_copy(update={"metrics": result.metrics.model_copy(update={
                "latency": latency.model_copy(update={"processes": placed})})})
        self.ok.append(result)

    def _timing(self) -> Optional[Timing]:
        processes = [process for result in self.ok if result.metrics.latency
                     for process in result.metrics.latency.processes]
        if not processes:
            return None
        return stats.combine(processes, self.ok[0].metrics.latency.method, self.job.repetition.target)

    def wants_process(self) -> bool:
        if self.stored or self.lost is not None:
            return False
        if self._processes() < self.job.repetition.processes:
            return True
        timing = self._timing()
        return timing is not None and stats.wants_another_process(timing, self.job.repetition, self._spent_s())

    def _processes(self) -> int:
        return sum(processes_measured(result) for result in self.ok)

    def _spent_s(self) -> float:
        spans = [result.provenance.ended_at - result.provenance.started_at for result in self.ok
                 if result.provenance.ended_at and result.provenance.started_at]
        return sum(span.total_seconds() for span in spans)

    def result(self) -> Result:
        """The cell's Result: its first ok process with the timing of all of them (the figures scaled to the combined
        median), or the failure when no process ended ok."""
        self.stored = True
        if not self.ok:
            return self.lost  # type: ignore[return-value]
        first, timing = self.ok[0], self._timing()
        metrics = first.metrics
        if timing is not None and metrics.latency is not None:
            lost = 1 if self.lost is not None else 0
            timing = timing.model_copy(update={"lost_processes": lost})
            scale = metrics.latency.median_ms / timing.median_ms
            metrics = metrics.model_copy(update={
                "latency": timing,
                "tokens_per_s": metrics.tokens_per_s * scale if metrics.tokens_per_s is not None else None,
                "tflops": metrics.tflops * scale if metrics.tflops is not None else None})
        provenance = first.provenance.model_copy(update={
            "ended_at": self.ok[-1].provenance.ended_at, "order_seed": self.order_seed,
            "clocks": [reading for result in self.ok for reading in result.provenance.clocks]})
        reason = first.reason
        if self.lost is not None:
            kept = self._processes()
            reason = (f"{kept} process(es) kept; process {kept + 1} ended {self.lost.status}: "
                      f"{self.lost.reason or 'no reason recorded'}")
        return first.model_copy(update={"metrics": metrics, "provenance": provenance, "reason": reason})


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
