"""One sweep: plan per env, store what cannot run, run the rest through one runtime per GPU at once (a lane each:
a thread, the GPU's comparison groups, its share of the host's cores; orchestrator/sweep/schedule.py), store every
result as it arrives."""

import itertools
import math
import random
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from mlcbench.orchestrator.envs import config_key, load_env
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import EnvPlan, Filters, expand, plan_env
from mlcbench.orchestrator.runtimes.base import Lane, Runtime, StopRequest
from mlcbench.orchestrator.runtimes.follower import run_jobs
from mlcbench.orchestrator.runtimes.registry import start_runtime
from mlcbench.orchestrator.store import Store, provenance, record
from mlcbench.orchestrator.sweep import recovery, schedule, sharing
from mlcbench.orchestrator.sweep.cells import CellAttempt, WorkerScope, on_gpu
from mlcbench.schema import (FINAL_STATUSES, OWN_WORKER_WORKFLOWS, Calibration, EnvSpec, GpuInfo, JobSpec, Result,
                             Suite)
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR, GATE_MEMBERS, Startup, new_sweep_id

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
    # how many cells a worker process runs (cells.WorkerScope), stored in each result's provenance
    worker_scope: WorkerScope = "cell"
    # how a worker's interpreter starts (protocol.Startup; the local env forks, other runtimes start each anew)
    startup: Startup = "exec"
    # each GPU's workers on a share of the host's cores of their own (several GPUs, or several lanes of one)
    pin_cores: bool = True
    # lanes (worker processes at once) per GPU: their compiles overlap, their timed windows never do (sharing.py)
    overlap: int = 1
    # stop after this many rounds (None: when every cell has its processes); the next sweep resumes
    max_rounds: Optional[int] = None
    # the seconds a process is expected to take (the lanes' balance, the progress line's estimate)
    estimator: schedule.Estimator = field(default_factory=schedule.Estimator)


@dataclass
class SweepReport:
    stored: list[Result] = field(default_factory=list)
    skipped: int = 0
    # set when a stop request ended the sweep before every planned job had a result
    interrupted: bool = False
    # cells left short of their processes: by a stop request, or where --rounds ended the sweep (not interrupted)
    cells_short: int = 0
    # process results that the workers of a killed sweep had written and that this sweep stored (recovery.recover)
    recovered: int = 0

    @property
    def failed_jobs(self) -> int:
        """Cells whose attempt ended without an answer (failed, crashed, oom, timeout)."""
        return sum(result.status not in FINAL_STATUSES for result in self.stored)

    @property
    def failed_checks(self) -> int:
        """Cells that ran and gave a wrong answer: their correctness check against eager failed."""
        return sum(result.status == "ok" and result.correctness is not None and not result.correctness.passed
                   for result in self.stored)

    @property
    def lost_processes(self) -> int:
        """Worker processes of ok cells that crashed or failed after others had run (a warm start that fails)."""
        return sum(result.metrics.latency.lost_processes for result in self.stored
                   if result.status == "ok" and result.metrics.latency is not None)

    @property
    def went_wrong(self) -> bool:
        """Anything a script must not take for success: the sweep's exit code says so (ExitCode.JOBS_FAILED)."""
        return bool(self.failed_jobs or self.failed_checks or self.lost_processes)


class SweepListener:
    """Progress callbacks; the CLI draws them, tests and benchmarks may ignore them."""

    def planned(self, to_run: int, skipped: int) -> None: ...

    def job_started(self, job: JobSpec) -> None: ...

    def round_started(self, index: int, cells: int) -> None: ...

    def work_planned(self, seconds: float, lanes: int) -> None:
        """The estimated seconds of worker processes an env's cells will take, shared by this many lanes (GPUs)."""

    def work_done(self, seconds: float) -> None:
        """A worker process ended: the seconds it was estimated at."""

    def process_done(self, result: Result) -> None:
        """One worker process's result for a cell (stored at once; job_done when the cell has all its processes)."""

    def due_changed(self, processes: int) -> None:
        """The worker processes still to run changed by this many beyond the one that just ended: a cell that ended
        after a failed process needs none of its remaining ones (negative), a cell whose first process compiled into
        an empty cache needs one more (its count is of one program: stats.combine_cell)."""

    def job_done(self, result: Result) -> None: ...


RuntimeFactory = Callable[[EnvSpec, SweepOptions, Lane], Runtime]


def plan(options: SweepOptions, store: Optional[Store]) -> list[EnvPlan]:
    """What each env runs, stores as unsupported and skips (store None: nothing stored yet)."""
    envs = [load_env(name) for name in options.env_names]
    jobs = expand(options.suite, options.target, options.filters, options.checkpoints)
    cells = {env.name: {r.job_id: r for r in (store.cells(env=env.name, gpu_tag=options.target.tag) if store else [])}
             for env in envs}
    return [plan_env(env, jobs, options.target, cells[env.name], options.rerun, config_key(env)) for env in envs]


def run(options: SweepOptions, store: Store, listener: Optional[SweepListener] = None,
        runtime_factory: Optional[RuntimeFactory] = None, stop: Optional[StopRequest] = None,
        plans: Optional[list[EnvPlan]] = None) -> SweepReport:
    """plans: what to run when already planned (a Slurm array task runs its share of a sweep planned at submission)."""
    listener = listener or SweepListener()
    runtime_factory = runtime_factory or make_runtime
    stop = stop or StopRequest()
    recovered = 0
    if plans is None:
        recovered = recovery.recover(options.workdir, store)
        plans = plan(options, store)
    report = SweepReport(skipped=sum(p.skipped for p in plans), recovered=recovered)
    # progress is counted in worker processes: each cell's minimum, and one for each result stored without one
    listener.planned(sum(p.processes_due(job) for p in plans for job in p.to_run)
                     + sum(len(p.unsupported) for p in plans), report.skipped)
    writer = _ResultWriter(store, report, options.sweep_id, {p.env.name: p.config_key for p in plans})
    for env_plan in plans:
        env = env_plan.env
        for result in env_plan.unsupported:
            listener.process_done(result)
            listener.job_done(writer.put(result, env.name, options.target.tag, None))
        if not env_plan.to_run:
            continue
        if stop.requested:
            report.cells_short += len(env_plan.to_run)
            continue
        report.cells_short += _run_env(env, env_plan, options, runtime_factory, writer, listener, stop,
                                       options.workdir / f"{options.sweep_id}-{env.name}")
    # a stop that came while the last jobs ran, which then ended, interrupted nothing; nor does the end of --rounds
    report.interrupted = bool(report.cells_short) and stop.requested
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
            cell: Optional[CellAttempt] = None) -> Result:
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
             writer: _ResultWriter, listener: SweepListener, stop: StopRequest, workdir: Path) -> int:
    """The cells of one env, each GPU's in rounds: a lane per GPU (one in all on a CPU), each with its own runtime
    and the comparison groups assigned to it (assign_lanes: every workflow of one model and batch on one GPU, so
    that ratios compare processes of one GPU; a cell never mixes GPUs). Each round runs every cell of the lane that
    wants another process once, in an order shuffled per round, so that drift (clocks, heat, the host) hits every
    workflow alike; each process is a fresh worker (worker_scope "cell"), or a worker runs its share of the round
    (worker_scope "round"). A cell an earlier, stopped sweep left short of its processes starts from the
    processes it stored. Every process's result is stored as it arrives: a killed sweep loses only those in
    flight, and of those the next sweep reads back what the workers wrote (recovery). Returns the cells left short of
    their processes (a stop request, or the end of --rounds, came first)."""
    git_rev = provenance.git_revision()
    described = recovery.SweepRecord(sweep_id=options.sweep_id, env=env.name, gpu_tag=options.target.tag,
                                     config_key=env_plan.config_key, order_seed=options.order_seed,
                                     worker_scope=options.worker_scope, git_rev=git_rev, rerun=options.rerun,
                                     store=recovery.store_identity(writer._store.url))
    with recovery.claimed(workdir, described):
        return _run_cells(env, env_plan, options, runtime_factory, writer, listener, stop, workdir, git_rev)


def _run_cells(env: EnvSpec, env_plan: EnvPlan, options: SweepOptions, runtime_factory: RuntimeFactory,
               writer: _ResultWriter, listener: SweepListener, stop: StopRequest, workdir: Path,
               git_rev: Optional[str]) -> int:
    runtimes: list[tuple[Optional[GpuInfo], Runtime]] = []
    try:
        gpus = options.target.gpus or (None,)
        lane_gpus = [(index, gpu) for index, gpu in enumerate(gpus) for _ in range(options.overlap)]
        shares = schedule.core_shares(len(lane_gpus)) if options.pin_cores else [None] * len(lane_gpus)
        gates = [workdir / "gates" / f"gpu{index}" if options.overlap > 1 else None for index, _ in lane_gpus]
        budgets = {index: sharing.MemoryBudget(gpu) for index, gpu in enumerate(gpus)}
        for (_, gpu), cpus, gate in zip(lane_gpus, shares, gates):
            if gate is not None:
                (gate / GATE_MEMBERS).mkdir(parents=True, exist_ok=True)
            runtimes.append((gpu, runtime_factory(env, options, Lane(gpu=gpu, cpus=cpus, startup=options.startup,
                                                                     gate=gate))))
        cells = {job.job_id: CellAttempt(job, options.sweep_id, options.order_seed, options.worker_scope, git_rev,
                                         env_plan.resumed.get(job.job_id)) for job in env_plan.to_run}
        for cell in cells.values():
            cell.runtime = next((index for index, (gpu, _) in enumerate(runtimes)
                                 if gpu is not None and gpu.uuid == cell.resumed_gpu_uuid), None)
        estimates = assign_lanes(cells, env_plan, options.estimator, len(runtimes))
        listener.work_planned(sum(estimates.values()), len(runtimes))
        lanes = _Lanes(env, env_plan, options, writer, listener, stop, workdir, runtimes, cells, gates,
                       [budgets[index] for index, _ in lane_gpus])
        _run_lanes(len(runtimes), lanes.run, stop)
        return sum(1 for cell in cells.values() if cell.due())
    finally:
        for _, runtime in runtimes:
            runtime.close()


@dataclass
class _Lanes:
    """What every lane of one env's sweep shares: the cells (each with its lane), the runtimes, where results go."""

    env: EnvSpec
    env_plan: EnvPlan
    options: SweepOptions
    writer: _ResultWriter
    listener: SweepListener
    stop: StopRequest
    workdir: Path
    runtimes: list[tuple[Optional[GpuInfo], Runtime]]
    cells: dict[str, CellAttempt]
    # per lane: the gate its GPU's workers time through (None: the lane has its GPU alone), its GPU's memory
    gates: list[Optional[Path]]
    budgets: list[sharing.MemoryBudget]

    def __post_init__(self) -> None:
        self.digests = {id(runtime): runtime.image_digest() for _, runtime in self.runtimes}

    def run(self, lane: int) -> None:
        """The lane's cells in rounds; what failed in an earlier sweep after everything else (EnvPlan.retried)."""
        mine = [cell for cell in self.cells.values() if cell.runtime == lane]
        phases = [[cell for cell in mine if cell.job.job_id not in self.env_plan.retried],
                  [cell for cell in mine if cell.job.job_id in self.env_plan.retried]]
        round_index, most = 0, self.options.max_rounds
        for phase in phases:
            while not self.stop.requested and (most is None or round_index < most):
                due = [cell.job for cell in phase if cell.due()]
                if not due:
                    break
                self._round(lane, due, round_index)
                round_index += 1

    def _round(self, lane: int, due: list[JobSpec], round_index: int) -> None:
        gpu, runtime = self.runtimes[lane]
        order = list(due)
        random.Random(f"{self.options.order_seed}:{self.env.name}:{round_index}").shuffle(order)
        positions = {job.job_id: position for position, job in enumerate(order)}
        with self.writer.lock:
            self.listener.round_started(round_index, len(order))
        runtime.begin_round()
        folder = self.workdir / (f"round-{round_index:02d}" + (f"-gpu{lane}" if len(self.runtimes) > 1 else ""))
        for number, unit in enumerate(_units(self.options.worker_scope, runtime.isolate_groups, order)):
            if self.stop.requested:
                return
            unit_folder = folder / f"unit-{number:03d}"
            recovery.describe_unit(unit_folder, recovery.UnitRecord(
                round=round_index, positions={job.job_id: positions[job.job_id] for job in unit}, gpu=gpu,
                image_digest=self.digests[id(runtime)]))
            with self.budgets[lane].reserved(max(sharing.memory_estimate(job) for job in unit)):
                try:
                    run_jobs(runtime, unit, unit_folder,
                             lambda result: self._stored(lane, round_index, positions[result.job_id], result),
                             stop=self.stop, on_start=lambda job: _started(self.writer, self.listener, job),
                             on_calibration=self._calibrator(gpu))
                finally:
                    gate = self.gates[lane]
                    if gate is not None:
                        sharing.resume_stopped(gate)

    def _stored(self, lane: int, round_index: int, position: int, result: Result) -> None:
        gpu, runtime = self.runtimes[lane]
        cell = self.cells[result.job_id]
        with self.writer.lock:
            self.listener.process_done(result)
            self.listener.work_done(self.options.estimator.process_s(
                cell.job, cold=schedule.cold_processes(cell.job, cold_first=not cell.processes) > 0))
            due_before = cell.due()
            attempt = cell.add(on_gpu(result, gpu), round_index, position, self.digests[id(runtime)])
            stored = self.writer.put(attempt, self.env.name, self.options.target.tag, cell.digest, cell)
            self.listener.due_changed(cell.due() - (due_before - 1))
            self.listener.job_done(stored)

    def _calibrator(self, gpu: Optional[GpuInfo]) -> Optional[Callable[[Calibration], None]]:
        """Where a GPU's measured ceilings go, the first time it is asked in the sweep; None after that."""
        if not self.writer.claim_calibration(gpu):
            return None
        return lambda calibration: self.writer.put_calibration(calibration, self.env.name, self.options.target.tag)


def assign_lanes(cells: dict[str, CellAttempt], env_plan: EnvPlan, estimator: schedule.Estimator,
                 lanes: int) -> dict[str, float]:
    """Each cell's lane (GPU), by comparison group, longest group first to the least loaded lane; a group some of
    whose cells a GPU already ran stays there. Returns each cell's estimated seconds."""
    estimates = {job_id: estimator.cell_s(cell.job, env_plan.processes_due(cell.job),
                                          cold_first=env_plan.cold_first(cell.job))
                 for job_id, cell in cells.items()}
    placed = {job_id: cell.runtime for job_id, cell in cells.items() if cell.runtime is not None}
    loads = [0.0] * lanes
    for group in schedule.groups([cell.job for cell in cells.values()], estimates, placed):
        lane = group.lane if group.lane is not None else loads.index(min(loads))
        loads[lane] += group.estimate_s
        for job in group.jobs:
            cells[job.job_id].runtime = lane
    return estimates


def _started(writer: _ResultWriter, listener: SweepListener, job: JobSpec) -> None:
    with writer.lock:
        listener.job_started(job)


def _units(scope: WorkerScope, isolate_groups: bool, jobs: list[JobSpec]) -> list[list[JobSpec]]:
    """A lane's round of jobs for one worker process each: one job (scope "cell", in the round's order), or the
    lane's share of the round (work_units)."""
    if scope == "cell":
        return [[job] for job in jobs]
    return work_units(isolate_groups, jobs, 1)


def _run_lanes(lanes: int, run_lane: Callable[[int], None], stop: StopRequest) -> None:
    """One thread per lane; a failure in one stops the others at once and is raised here."""
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            run_lane(index)
        except BaseException as error:  # the main thread re-raises it; the other lanes stop at once
            errors.append(error)
            stop.now.set()

    threads = [threading.Thread(target=guarded, args=(index,), name=f"lane-{index}", daemon=True)
               for index in range(lanes)]
    try:
        for thread in threads:
            thread.start()
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


def make_runtime(env: EnvSpec, options: SweepOptions, lane: Lane) -> Runtime:
    return start_runtime(env, options.cache_dir / env.name, options.sweep_id, lane)
