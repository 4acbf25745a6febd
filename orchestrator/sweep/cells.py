"""One attempt at a cell, as the host builds it from the results of its worker processes (shared by the sweep and by
the reading back of a killed sweep's results)."""

from typing import Literal, Optional

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.planner import processes_due, stored_processes
from mlcbench.orchestrator.store import provenance
from mlcbench.schema import GpuInfo, JobSpec, Result

# cell: a fresh worker process for every process of every cell (docs/methodology.md); round: one worker process runs its
# share of a round's cells one after another (fewer start-ups)
WorkerScope = Literal["cell", "round"]


class CellAttempt:
    """One attempt at a cell: its processes so far (after those an earlier, stopped sweep stored, when it goes on from
    them) and the one Result they make, stored after every process (`attempt`: its store row). A process on another
    GPU, host, code revision or library versions than the attempt's starts a new attempt: a cell never mixes them."""

    def __init__(self, job: JobSpec, sweep_id: str, order_seed: int, worker_scope: WorkerScope, git_rev: Optional[str],
                 resumed: Optional[Result] = None, attempt: Optional[int] = None):
        """resumed: a stored attempt to go on from, as a new attempt, or in its own row `attempt`."""
        self.job, self.sweep_id, self.order_seed = job, sweep_id, order_seed
        self.worker_scope, self.git_rev = worker_scope, git_rev
        self.digest: Optional[str] = None
        self.runtime: Optional[int] = None  # the index of the runtime (GPU) that runs this cell's processes
        gpu = resumed.provenance.gpu if resumed is not None else None
        self.resumed_gpu_uuid = gpu.uuid if gpu is not None else None
        self._begin(resumed)
        self.attempt = attempt

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
        processes = result.metrics.worker_processes()
        if not processes:
            self.untimed = True
        else:
            self.processes.extend(process.model_copy(update={
                "sweep_id": self.sweep_id, "round": round_index, "position": position,
                "correctness": process.correctness or result.correctness}) for process in processes)
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
                if correctness.processes_checked else "") + (
                f": {correctness.not_finite}" if correctness.not_finite else "")
        provenance_ = base.provenance.model_copy(update={
            "ended_at": self.ended_at, "order_seed": self.order_seed, "clocks": self.clocks})
        return base.model_copy(update={"metrics": metrics, "correctness": correctness, "provenance": provenance_,
                                       "reason": reason})


def on_gpu(result: Result, gpu: Optional[GpuInfo]) -> Result:
    """The host's record of the GPU it pinned the worker to wins over the worker's (whose indices are relative to its
    visible devices); what only the worker knows (clocks, driver) is kept."""
    if gpu is None:
        return result
    seen = result.provenance.gpu
    merged = gpu if seen is None else seen.model_copy(update={
        name: value for name, value in gpu.model_dump().items() if value is not None})
    return result.model_copy(update={"provenance": result.provenance.model_copy(update={"gpu": merged})})
