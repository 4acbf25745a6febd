"""How long a suite (`paper` by default) should take on 1, 2 and 4 GPUs of a host like the one a store was measured on,
scheduled as the sweep schedules it (comparison groups, longest first, each to the least-loaded GPU). An estimate,
not a measurement: a cell the store holds is costed from its processes' spans (the sweep's Estimator: the cold
process, then the suite's count of warm ones at their median), a crashed cell by its attempt's span; a cell it does not
hold from the sweep's typical costs (each workflow's compile_cost in schema/catalog.py, a process's own in
orchestrator/sweep/schedule.py), unless its workflow needs a package
the host's results never recorded or every stored cell of its workflow was unsupported (then it costs nothing) or
crashed (then it costs as they did). Markdown on stdout.

    python benchmarks/paper_estimate.py STORE.db [--suite paper] [--lanes 1,2,4]
"""

import argparse
import statistics
from collections import defaultdict
from typing import Iterable, Optional

from mlcbench.orchestrator.cli.console import format_duration
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.suites import get_suite
from mlcbench.orchestrator.sweep import schedule
from mlcbench.schema import JobSpec, Result
from mlcbench.schema.catalog import WORKFLOWS


def attempt_s(result: Result) -> float:
    provenance = result.provenance
    if provenance.started_at is None or provenance.ended_at is None:
        return 0.0
    return (provenance.ended_at - provenance.started_at).total_seconds()


def measured_on(results: Iterable[Result]) -> str:
    """The GPUs, host CPUs, versions, dates and commits of the store's results, in words."""
    def listed(values: Iterable[Optional[str]]) -> str:
        return ", ".join(sorted({value for value in values if value})) or "not recorded"

    results = list(results)
    provenances = [result.provenance for result in results]
    return (f"{listed(p.gpu.name if p.gpu else None for p in provenances)}, driver "
            f"{listed(p.gpu.driver if p.gpu else None for p in provenances)}; host {listed(p.host_cpu for p in provenances)}; "
            f"torch {listed((p.packages or {}).get('torch') for p in provenances)}; measured "
            f"{listed(p.ended_at.date().isoformat() if p.ended_at else None for p in provenances)}, commit "
            f"{listed(p.git_rev for p in provenances)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a SQLite file measured on the host to estimate for")
    parser.add_argument("--suite", default="paper")
    parser.add_argument("--lanes", default="1,2,4", help="GPU counts to estimate for")
    args = parser.parse_args()
    stored = {(r.job.model, r.job.workflow, r.job.batch_size): r
              for r in Store(f"sqlite:///{args.store}", create=False).cells()}
    estimator = schedule.Estimator.from_results(stored.values())
    by_workflow: dict[str, list[Result]] = defaultdict(list)
    packages: set[str] = set()  # what the host's worker had installed, by the results that recorded it
    for result in stored.values():
        by_workflow[result.job.workflow].append(result)
        packages.update(result.provenance.packages or {})

    def cost(job: JobSpec) -> tuple[float, str]:
        """A cell's GPU seconds and where the figure came from."""
        result = stored.get((job.model, job.workflow, job.batch_size))
        if result is not None and result.status == "ok":
            return estimator.cell_s(job, job.repetition.processes, cold_first=True), "stored ok"
        if result is not None:
            # a cell that ended without timed calls: its attempt where recorded; else nothing for one found unsupported
            # (mostly at planning), one cold process for one that crashed or failed
            fallback = 0.0 if result.status == "unsupported" else estimator.cell_s(job, 0, cold_first=True)
            return attempt_s(result) or fallback, f"stored {result.status}"
        missing = [package for package in WORKFLOWS[job.workflow].requires if package not in packages]
        if missing:
            return 0.0, "needs a package the host lacks"
        statuses = {r.status for r in by_workflow.get(job.workflow, [])}
        if statuses == {"unsupported"}:
            return 0.0, "workflow unsupported there"
        if statuses == {"crashed"}:
            spans = [attempt_s(r) for r in by_workflow[job.workflow] if attempt_s(r)]
            return (statistics.median(spans) if spans else estimator.cell_s(job, 0, cold_first=True),
                    "workflow crashed there")
        return estimator.cell_s(job, job.repetition.processes, cold_first=True), "typical costs"

    jobs = get_suite(args.suite).expand("cuda")
    costs = {job.job_id: cost(job) for job in jobs}
    sources: dict[str, list[float]] = defaultdict(list)
    per_workflow: dict[str, float] = defaultdict(float)
    for job in jobs:
        seconds, source = costs[job.job_id]
        sources[source].append(seconds)
        per_workflow[f"{job.info.kind} {job.workflow}"] += seconds
    total = sum(seconds for seconds, _ in costs.values())
    print(f"# How long the whole `{args.suite}` suite should take on the host of `{args.store}` (an estimate, not a "
          f"measurement)\n")
    print(f"`python benchmarks/paper_estimate.py {args.store}`: the cells the store holds are costed from their "
          f"processes' spans there, the others from the sweep's typical costs (each workflow's `compile_cost` in "
          f"`schema/catalog.py`; a compile per billion parameters is an extrapolation), and all scheduled as the sweep "
          f"schedules them.\n")
    print(f"The store: {measured_on(stored.values())}.\n")
    print(f"{len(jobs)} cells, {format_duration(total)} of GPU time in all.\n")
    print("| cells costed from | cells | GPU time |\n|---|---:|---:|")
    for source, values in sorted(sources.items()):
        print(f"| {source} | {len(values)} | {format_duration(sum(values))} |")
    print("\n| GPUs | estimated wall time | per GPU |\n|---:|---:|---|")
    groups = schedule.groups(jobs, {job_id: seconds for job_id, (seconds, _) in costs.items()}, {})
    for lanes in (int(value) for value in args.lanes.split(",")):
        loads = schedule.simulate(groups, lanes)
        print(f"| {lanes} | {format_duration(max(loads))} | {', '.join(format_duration(load) for load in loads)} |")
    print("\n| the most GPU time | GPU time |\n|---|---:|")
    for name, seconds in sorted(per_workflow.items(), key=lambda item: -item[1])[:8]:
        print(f"| {name} | {format_duration(seconds)} |")


if __name__ == "__main__":
    main()
