"""Which GPU runs which cells, in what order, and how long that will take.

Cells are scheduled in comparison groups: every workflow of one (model, precision, batch, lengths, seed) runs on one
GPU, so that a speedup, "fastest" and P3 compare processes of one physical GPU. The groups go longest first to
whichever GPU is free (list scheduling, longest processing time first), so no GPU finishes long after the others, and
each GPU's workers run on a share of the host's cores of their own. Estimates come from the store's history of the
same cell on the same GPU model where it has one, else from the typical costs of its workflow's catalog row."""

import os
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from mlcbench.schema import WORKFLOWS, JobSpec, Result
from mlcbench.schema.catalog import TypicalCompile

# seconds a worker process costs beyond its compile and its timed window, by model kind, where the store has no
# history of the cell (later processes in the committed studies: synthetic 1.4-2.2 s, LLM 8-13 s)
PROCESS_S = {"synthetic": 2.0, "llm": 7.0}
# seconds an LLM process adds per billion parameters (building it, eager's reference, its checks) at batch 64
LLM_S_PER_BILLION = 0.6
# a warm process pays this share of its workflow's typical cold compile (WorkflowInfo.compile_cost)
WARM_COMPILE_SHARE = 0.1
# a GPU process's timed window (warm-up, the calls of a minimum window long enough for the energy counter, the
# figures after them, its neighbours' work drained first), where the store has none of the cell
WINDOW_S = {"synthetic": 3.0, "llm": 6.0}


def comparison_key(job: JobSpec) -> tuple:
    """What the cells compared with one another share: all but the workflow and its options (the eager run a
    report pairs a speedup with: JobSpec.baseline_settings)."""
    return (job.model, job.precision, job.batch_size, job.baseline_settings)


@dataclass
class Group:
    """The cells of one comparison, to run on one GPU."""

    jobs: list[JobSpec]
    estimate_s: float
    lane: Optional[int] = None  # a GPU that already ran some of its cells (a resumed sweep)
    window_s: float = 0.0  # of estimate_s, its timed windows: when the lanes of its GPU stand stopped


@dataclass
class Estimator:
    """Seconds a worker process of a cell is expected to take."""

    # (cell, compile cache) -> seconds of stored processes of that cell (its job id) on this GPU model
    history: Mapping[tuple[str, Optional[str]], list[float]] = field(default_factory=dict)
    # cell -> seconds of its stored processes' timed windows
    windows: Mapping[str, list[float]] = field(default_factory=dict)

    @classmethod
    def from_results(cls, results: Iterable[Result]) -> "Estimator":
        history: dict[tuple[str, Optional[str]], list[float]] = defaultdict(list)
        windows: dict[str, list[float]] = defaultdict(list)
        for result in results:
            latency = result.metrics.latency
            for process in (latency.processes + latency.other_series) if latency is not None else []:
                if process.launched_at is not None and process.ended_at is not None:
                    history[(result.job_id, process.compile_cache)].append(
                        (process.ended_at - process.launched_at).total_seconds())
                if process.window is not None:
                    windows[result.job_id].append((process.window.closed_at - process.window.opened_at).total_seconds())
        return cls(dict(history), dict(windows))

    def process_s(self, job: JobSpec, cold: bool) -> float:
        """A process's seconds, its timed window included."""
        cost = _compile_cost(job)
        seen = self.history.get((job.job_id, ("cold" if cold else "warm") if cost else None))
        if seen:
            return statistics.median(seen)
        billions = (job.info.parameter_count() or 0) / 1e9 if job.info.kind == "llm" else 0.0
        base = PROCESS_S[job.info.kind] + LLM_S_PER_BILLION * billions * (1 + job.batch_size / 64) + self.window_s(job)
        if cost is None:
            return base
        compile_s = cost.for_model(billions)
        return base + (compile_s if cold else WARM_COMPILE_SHARE * compile_s)

    def window_s(self, job: JobSpec) -> float:
        """A process's timed window: the time its GPU's other lanes stand stopped (none on a CPU)."""
        seen = self.windows.get(job.job_id)
        if seen:
            return statistics.median(seen)
        return WINDOW_S[job.info.kind] if job.device == "cuda" else 0.0

    def cell_s(self, job: JobSpec, processes_due: int, cold_first: bool) -> float:
        """A cell's processes still due: the first cold where the cell has compiled nothing yet (it comes on top
        of the count: planner.processes_due)."""
        cold = cold_processes(job, cold_first)
        return cold * self.process_s(job, cold=True) + processes_due * self.process_s(job, cold=False)

    def cell_window_s(self, job: JobSpec, processes_due: int, cold_first: bool) -> float:
        """The seconds of those processes' timed windows."""
        return (cold_processes(job, cold_first) + processes_due) * self.window_s(job)


def cold_processes(job: JobSpec, cold_first: bool) -> int:
    """The cold process a cell that compiles runs on top of its count, where it has compiled nothing yet."""
    return int(cold_first and _compile_cost(job) is not None)


def _compile_cost(job: JobSpec) -> Optional[TypicalCompile]:
    """The typical cold compile of the job's workflow; None where it compiles nothing (or is a fault workflow)."""
    info = WORKFLOWS.get(job.workflow)
    return info.typical_compile(job.info.kind) if info is not None else None


def groups(jobs: Sequence[JobSpec], estimate: Mapping[str, float], lanes_of: Mapping[str, int],
           windows: Optional[Mapping[str, float]] = None) -> list[Group]:
    """The comparison groups of jobs, longest first; estimate: job_id -> seconds; lanes_of: job_id -> the lane that
    already ran processes of the cell (its group stays there); windows: job_id -> seconds of its timed windows."""
    by_key: dict[tuple, list[JobSpec]] = defaultdict(list)
    for job in jobs:
        by_key[comparison_key(job)].append(job)
    made = []
    for members in by_key.values():
        lanes = sorted({lanes_of[job.job_id] for job in members if job.job_id in lanes_of})
        made.append(Group(members, sum(estimate[job.job_id] for job in members), lanes[0] if lanes else None,
                          sum((windows or {}).get(job.job_id, 0.0) for job in members)))
    return sorted(made, key=lambda group: group.estimate_s, reverse=True)


def simulate(groups_: Sequence[Group], lanes: int, overlap: int = 1) -> list[float]:
    """Each GPU's seconds when the groups, longest first, go to whichever of its lanes (`lanes` GPUs x `overlap`) is
    free first (as the sweep's lanes take them): a lane's own work, and the timed windows of its GPU's other lanes,
    in which it stands stopped."""
    loads = [0.0] * max(lanes * overlap, 1)
    windows = [0.0] * len(loads)
    for group in groups_:
        lane = group.lane if group.lane is not None and group.lane < len(loads) else loads.index(min(loads))
        loads[lane] += group.estimate_s
        windows[lane] += group.window_s
    return [max(loads[lane] + sum(windows[gpu * overlap:(gpu + 1) * overlap]) - windows[lane]
                for lane in range(gpu * overlap, (gpu + 1) * overlap)) for gpu in range(max(lanes, 1))]


def core_shares(lanes: int, available: Optional[Iterable[int]] = None) -> list[Optional[frozenset[int]]]:
    """The host's cores cut into one share per lane, whole physical cores each (hyperthread siblings stay together);
    None for every lane where there is one lane, or fewer cores than lanes (nothing to keep apart)."""
    cpus = sorted(available if available is not None else os.sched_getaffinity(0))
    if lanes <= 1 or len(cpus) < lanes:
        return [None] * max(lanes, 1)
    cores = _physical_cores(cpus)
    if len(cores) < lanes:
        cores = [[cpu] for cpu in cpus]
    shares: list[set[int]] = [set() for _ in range(lanes)]
    for index, core in enumerate(cores):
        shares[index * lanes // len(cores)].update(core)
    return [frozenset(share) for share in shares]


def _physical_cores(cpus: Sequence[int]) -> list[list[int]]:
    """The cpus grouped by physical core (Linux's topology files), in the order of their first cpu."""
    seen: dict[str, list[int]] = {}
    for cpu in cpus:
        try:
            siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        except OSError:
            siblings = str(cpu)
        seen.setdefault(siblings, []).append(cpu)
    return list(seen.values())
