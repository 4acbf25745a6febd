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
from typing import Callable, Iterator, Literal, Optional

from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import EnvPlan, Filters, expand, plan_env, processes_due, stored_processes
from mlcbench.orchestrator.runtimes.base import Runtime, StopRequest
from mlcbench.orchestrator.runtimes.follower import run_jobs
from mlcbench.orchestrator.store import Store, provenance, record
from mlcbench.orchestrator import stats
from mlcbench.schema import OWN_WORKER_WORKFLOWS, Calibration, EnvSpec, GpuInfo, JobSpec, Result, Suite
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR, new_sweep_id

JOIN_POLL_S = 0.2
WorkerScope = Literal["cell", "round"]


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
    # cell: a fresh worker process for every process of every cell (as DESIGN.md says); round: one worker process runs
    # its share of a round's cells one after another (fewer start-ups). Stored in each result's provenance.
    worker_scope: WorkerScope = "cell"


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
        """One worker process's result for a cell (stored at once; job_done when the cell has all its processes)."""

    def due_changed(self, processes: int) -> None:
        """The worker processes still to run changed by this many beyond the one that just ended: a cell that ended
        after a failed process needs none of its remaining ones (negative), a cell whose first process compiled into
        an empty cache needs one more (its count is of one program: stats.combine_cell)."""

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
    writer = _ResultWriter(store, report, options.sweep_id, {p.env.name: p.config_key for p in plans})
    for env_plan in plans:
        env = env_plan.env
        for result in env_plan.unsupported:
            listener.process_done(result)
            listener.job_done(writer.put(result, env.name, options.target.tag, None))
        if not env_plan.to_run or stop.requested:
            continue
        _run_env(env, env_plan, options, runtime_factory, writer, listener, stop,
                 options.workdir / f"{options.sweep_id}-{env.name}")
    report.interrupted = stop.requested
    return report


class _ResultWriter:
    """Stores results from every worker thread, one at a time (a transaction each), in the order they arrive."""

    def __init__(self, store: Store, report: SweepReport, sweep_id: str, config_keys: dict[str, str]):
        self._store, self._report, self._sweep_id = store, report, sweep_id
        self._config_keys = config_keys
        self.lock = threading.RLock()
        self._calibrated: set[str] = set()  # GPU UUIDs ("cpu") whose ceilings this sweep has measured
        self._reported: dict[int, int] = {}  # store row -> its place in report.stored

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

    def put(self, result: Result, env: str, gpu_tag: str, image_digest: Optional[str],
            cell: Optional["_Cell"] = None) -> Result:
        """Store a result; a cell's attempt as a new row, then over that row as it grows by a process."""
        with self.lock:
            stored, row = record(self._store, result, env, gpu_tag, image_digest, self._sweep_id,
                                 self._config_keys[env], cell.attempt if cell is not None else None)
            if cell is not None:
                cell.attempt = row
            if row in self._reported:
                self._report.stored[self._reported[row]] = stored
            else:
                self._reported[row] = len(self._report.stored)
                self._report.stored.append(stored)
            return stored

def _run_env(env: EnvSpec, env_plan: EnvPlan, options: SweepOptions, runtime_factory: RuntimeFactory,
             writer: _ResultWriter, listener: SweepListener, stop: StopRequest, workdir: Path) -> None:
    """The cells of one env in rounds: each round runs every cell that wants another process once, the cells in an
    order shuffled per round, so that drift (clocks, heat, the host) hits every workflow alike; each process is a
    fresh worker (worker_scope "cell"), or a worker runs its share of the round (worker_scope "round"). One worker
    thread per GPU (one in all on a CPU), each with its own runtime; a cell stays on the GPU that ran its first
    process (a cell never mixes GPUs). A cell an earlier, stopped sweep left short of its processes starts from the
    processes it stored. Every process's result is stored as it arrives: a killed sweep loses only those in
    flight."""
    runtimes: list[tuple[Optional[GpuInfo], Runtime]] = []
    try:
        for gpu in options.target.gpus or (None,):
            runtimes.append((gpu, runtime_factory(env, options, gpu)))
        digests = {id(runtime): runtime.image_digest() for _, runtime in runtimes}
        git_rev = provenance.git_revision()
        cells = {job.job_id: _Cell(job, options.order_seed, options.worker_scope, git_rev,
                                   env_plan.resumed.get(job.job_id)) for job in env_plan.to_run}
        for cell in cells.values():
            cell.runtime = next((index for index, (gpu, _) in enumerate(runtimes)
                                 if gpu is not None and gpu.uuid == cell.resumed_gpu_uuid), None)
        for round_index in itertools.count():
            due = [cell.job for cell in cells.values() if cell.due()]
            if not due or stop.requested:
                break
            order = list(due)
            random.Random(f"{options.order_seed}:{env.name}:{round_index}").shuffle(order)
            positions = {job.job_id: position for position, job in enumerate(order)}
            listener.round_started(round_index, len(order))

            def on_result(result: Result, runtime_index: int) -> None:
                cell = cells[result.job_id]
                gpu, runtime = runtimes[runtime_index]
                with writer.lock:
                    listener.process_done(result)
                    due_before = cell.due()
                    cell.runtime = runtime_index
                    attempt = cell.add(_on_gpu(result, gpu), round_index, positions[result.job_id],
                                       digests[id(runtime)])
                    stored = writer.put(attempt, env.name, options.target.tag, cell.digest, cell)
                    listener.due_changed(cell.due() - (due_before - 1))
                    listener.job_done(stored)

            def calibrator(gpu: Optional[GpuInfo]) -> Optional[Callable[[Calibration], None]]:
                if not writer.claim_calibration(gpu):
                    return None
                return lambda calibration: writer.put_calibration(calibration, env.name, options.target.tag)

            isolate = runtimes[0][1].isolate_groups
            pinned = [[job for job in order if cells[job.job_id].runtime == index] for index in range(len(runtimes))]
            shared = [job for job in order if cells[job.job_id].runtime is None]
            units = _Units([_units(options.worker_scope, isolate, jobs, 1) for jobs in pinned],
                           _units(options.worker_scope, isolate, shared, len(runtimes)))
            _run_units(runtimes, units, on_result, calibrator, lambda job: _started(writer, listener, job), stop,
                       workdir / f"round-{round_index:02d}")
    finally:
        for _, runtime in runtimes:
            runtime.close()


def _started(writer: _ResultWriter, listener: SweepListener, job: JobSpec) -> None:
    with writer.lock:
        listener.job_started(job)


def _units(scope: WorkerScope, isolate_groups: bool, jobs: list[JobSpec], workers: int) -> list[list[JobSpec]]:
    """A round's jobs for one worker process each: one job (scope "cell", in the round's order), or a share of the
    round (work_units)."""
    if scope == "cell":
        return [[job] for job in jobs]
    return work_units(isolate_groups, jobs, workers)


class _Units:
    """The work units of a round: each worker thread takes those of the cells pinned to its GPU first, then any
    cell's that no GPU has run yet."""

    def __init__(self, pinned: list[list[list[JobSpec]]], shared: list[list[JobSpec]]):
        self._queues = [queue.SimpleQueue() for _ in pinned]
        self._shared: queue.SimpleQueue[tuple[int, list[JobSpec]]] = queue.SimpleQueue()
        numbered = itertools.count()
        for own, units in zip(self._queues, pinned):
            for unit in units:
                own.put((next(numbered), unit))
        for unit in shared:
            self._shared.put((next(numbered), unit))

    def take(self, runtime_index: int) -> Optional[tuple[int, list[JobSpec]]]:
        for source in (self._queues[runtime_index], self._shared):
            try:
                return source.get_nowait()
            except queue.Empty:
                continue
        return None


def _run_units(runtimes: list[tuple[Optional[GpuInfo], Runtime]], units: _Units,
               on_result: Callable[[Result, int], None], calibrator: Calibrator,
               on_start: Callable[[JobSpec], None], stop: StopRequest, workdir: Path) -> None:
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []
    try:
        for index, (gpu, runtime) in enumerate(runtimes):
            thread = threading.Thread(target=_worker_loop, name=f"worker-gpu{gpu.index if gpu else '-'}", daemon=True,
                                      args=(index, gpu, runtime, units, on_result, calibrator, on_start, stop,
                                            workdir, errors))
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


def _worker_loop(index: int, gpu: Optional[GpuInfo], runtime: Runtime, units: _Units,
                 on_result: Callable[[Result, int], None], calibrator: Calibrator,
                 on_start: Callable[[JobSpec], None], stop: StopRequest, workdir: Path,
                 errors: list[BaseException]) -> None:
    try:
        while not stop.requested:
            taken = units.take(index)
            if taken is None:
                return
            number, unit = taken
            run_jobs(runtime, unit, workdir / f"unit-{number:03d}", lambda result: on_result(result, index),
                     stop=stop, on_start=on_start, on_calibration=calibrator(gpu))
    except BaseException as error:  # the main thread re-raises it; the other workers stop at once
        errors.append(error)
        stop.now.set()


class _Cell:
    """One attempt at a cell: its processes so far (after those an earlier, stopped sweep stored, when it goes on from
    them) and the one Result they make, stored after every process (`attempt`: its store row). A process on another
    GPU, host, code revision or library versions than the attempt's starts a new attempt: a cell never mixes them."""

    def __init__(self, job: JobSpec, order_seed: int, worker_scope: WorkerScope, git_rev: Optional[str],
                 resumed: Optional[Result] = None):
        self.job, self.order_seed, self.worker_scope, self.git_rev = job, order_seed, worker_scope, git_rev
        self.digest: Optional[str] = None
        self.runtime: Optional[int] = None  # the index of the runtime (GPU) that runs this cell's processes
        gpu = resumed.provenance.gpu if resumed is not None else None
        self.resumed_gpu_uuid = gpu.uuid if gpu is not None else None
        self._begin(resumed)

    def _begin(self, resumed: Optional[Result]) -> None:
        """A new attempt, going on from a stored one's processes where given."""
        self.attempt: Optional[int] = None
        # the Result whose figures and provenance the attempt carries: its first ok process's, or the resumed one
        self.base = resumed
        self.processes = stored_processes(resumed) if resumed is not None else []
        latency = resumed.metrics.latency if resumed is not None else None
        self.lost_before = latency.lost_processes if latency is not None else 0
        self.lost: Optional[Result] = None  # the first process that did not end ok; no more processes after it
        self.untimed = False  # an ok process without timed calls: nothing to repeat
        self.clocks = list(resumed.provenance.clocks) if resumed is not None else []
        self.ended_at = resumed.provenance.ended_at if resumed is not None else None

    def due(self) -> int:
        """Worker processes the cell still needs (planner.processes_due): none once one was lost."""
        if self.lost is not None or self.untimed:
            return 0
        return processes_due(self.job, self.processes)

    def add(self, result: Result, round_index: int, position: int, digest: Optional[str]) -> Result:
        """Take one process's result; returns the attempt as it now stands."""
        self.digest = digest
        if result.status != "ok":
            self.lost = result
            return self.result()
        result = result.model_copy(update={"provenance": result.provenance.model_copy(update={
            "git_rev": self.git_rev, "worker_scope": self.worker_scope})})
        if self.base is not None and provenance.setup_change(self.base, result):
            self._begin(None)
        if self.base is None:
            self.base = result
        latency = result.metrics.latency
        if latency is None or not latency.processes:
            self.untimed = True
        else:
            self.processes.extend(process.model_copy(update={
                "round": round_index, "position": position, "compile_s": result.metrics.compile_s,
                "compile_cache": result.metrics.compile_cache,
                "correctness": process.correctness or result.correctness}) for process in latency.processes)
        self.clocks.extend(result.provenance.clocks)
        self.ended_at = result.provenance.ended_at
        return self.result()

    def result(self) -> Result:
        """The attempt's Result: its first ok process with the timing of all of them (the figures scaled to the
        combined median), or the failure when no process ended ok."""
        if self.base is None:
            return self.lost  # type: ignore[return-value]
        base = self.base
        metrics = base.metrics
        if self.processes and metrics.latency is not None:
            timing = stats.combine_cell(self.processes, metrics.latency.method, self.job.repetition.target)
            timing = timing.model_copy(update={"lost_processes": self.lost_before + (self.lost is not None)})
            scale = metrics.latency.median_ms / timing.median_ms
            metrics = metrics.model_copy(update={
                "latency": timing,
                "tokens_per_s": metrics.tokens_per_s * scale if metrics.tokens_per_s is not None else None,
                "tflops": metrics.tflops * scale if metrics.tflops is not None else None,
                "compile_cold": stats.compile_cost(self.processes, "cold"),
                "compile_warm": stats.compile_cost(self.processes, "warm")})
        checks = [process.correctness for process in self.processes if process.correctness is not None]
        correctness = stats.combine_checks(checks) if checks else base.correctness
        reason = None
        if self.lost is not None:
            kept = len(self.processes)
            reason = (f"{kept} process(es) kept; process {kept + 1} ended {self.lost.status}: "
                      f"{self.lost.reason or 'no reason recorded'}")
        elif correctness is not None and not correctness.passed:
            reason = "correctness check failed against eager" + (
                f" in {correctness.processes_failed} of {correctness.processes_checked} processes"
                if correctness.processes_checked else "")
        provenance_ = base.provenance.model_copy(update={
            "ended_at": self.ended_at, "order_seed": self.order_seed, "clocks": self.clocks})
        return base.model_copy(update={"metrics": metrics, "correctness": correctness, "provenance": provenance_,
                                       "reason": reason})


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
