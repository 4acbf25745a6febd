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

# seconds a worker process costs beyond its compile, by model kind, when the store has no history of the cell
PROCESS_S = {"synthetic": 4.0, "llm": 15.0}
# seconds an LLM process adds per billion parameters (building it, eager's reference, the timed generate calls)
LLM_S_PER_BILLION = 5.0
# a warm process pays this share of its workflow's typical cold compile (WorkflowInfo.compile_cost)
WARM_COMPILE_SHARE = 0.1


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


@dataclass
class Estimator:
    """Seconds a worker process of a cell is expected to take."""

    # (model, workflow, batch size, compile cache) -> seconds of stored processes of that cell on this GPU model
    history: Mapping[tuple, list[float]] = field(default_factory=dict)

    @classmethod
    def from_results(cls, results: Iterable[Result]) -> "Estimator":
        history: dict[tuple, list[float]] = defaultdict(list)
        for result in results:
            latency = result.metrics.latency
            for process in (latency.processes + latency.other_series) if latency is not None else []:
                if process.launched_at is not None and process.ended_at is not None:
                    history[_history_key(result.job, process.compile_cache)].append(
                        (process.ended_at - process.launched_at).total_seconds())
        return cls(dict(history))

    def process_s(self, job: JobSpec, cold: bool) -> float:
        cost = _compile_cost(job)
        seen = self.history.get(_history_key(job, ("cold" if cold else "warm") if cost else None))
        if seen:
            return statistics.median(seen)
        billions = (job.info.parameter_count() or 0) / 1e9 if job.info.kind == "llm" else 0.0
        base = PROCESS_S[job.info.kind] + LLM_S_PER_BILLION * billions * (1 + job.batch_size / 64)
        if cost is None:
            return base
        compile_s = cost.for_model(billions)
        return base + (compile_s if cold else WARM_COMPILE_SHARE * compile_s)

    def cell_s(self, job: JobSpec, processes_due: int, cold_first: bool) -> float:
        """A cell's processes still due: the first cold where the cell has compiled nothing yet (it comes on top
        of the count: planner.processes_due)."""
        cold = cold_processes(job, cold_first)
        return cold * self.process_s(job, cold=True) + processes_due * self.process_s(job, cold=False)


def cold_processes(job: JobSpec, cold_first: bool) -> int:
    """The cold process a cell that compiles runs on top of its count, where it has compiled nothing yet."""
    return int(cold_first and _compile_cost(job) is not None)


def _compile_cost(job: JobSpec) -> Optional[TypicalCompile]:
    """The typical cold compile of the job's workflow; None where it compiles nothing (or is a fault workflow)."""
    info = WORKFLOWS.get(job.workflow)
    return info.typical_compile(job.info.kind) if info is not None else None


def _history_key(job: JobSpec, cache: Optional[str]) -> tuple:
    return (job.model, job.workflow, job.batch_size, cache)


def groups(jobs: Sequence[JobSpec], estimate: Mapping[str, float], lanes_of: Mapping[str, int]) -> list[Group]:
    """The comparison groups of jobs, longest first; estimate: job_id -> seconds; lanes_of: job_id -> the lane that
    already ran processes of the cell (its group stays there)."""
    by_key: dict[tuple, list[JobSpec]] = defaultdict(list)
    for job in jobs:
        by_key[comparison_key(job)].append(job)
    made = []
    for members in by_key.values():
        lanes = sorted({lanes_of[job.job_id] for job in members if job.job_id in lanes_of})
        made.append(Group(members, sum(estimate[job.job_id] for job in members), lanes[0] if lanes else None))
    return sorted(made, key=lambda group: group.estimate_s, reverse=True)


def simulate(groups_: Sequence[Group], lanes: int) -> list[float]:
    """Each lane's seconds when the groups, longest first, go to whichever lane is free first (as the sweep's lanes
    take them)."""
    loads = [0.0] * max(lanes, 1)
    for group in groups_:
        lane = group.lane if group.lane is not None and group.lane < len(loads) else loads.index(min(loads))
        loads[lane] += group.estimate_s
    return loads


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
