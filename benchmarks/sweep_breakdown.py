"""Where a sweep's wall time went, per GPU: busy (a worker process ran) and idle, and a process's time by phase
(start-up before the first timed call, compile, the timed calls and what follows them), from a store's per-process
spans (ProcessTiming.launched_at / ended_at / startup_s / compile_s); and which processes ran on which machine (a
sweep resumed on another one compiles there again). Markdown on stdout.

    python benchmarks/sweep_breakdown.py STORE.db [--sweep-id-prefix PREFIX]
"""

import argparse
import statistics
from collections import Counter, defaultdict
from datetime import datetime

from mlcbench.orchestrator.store import Store
from mlcbench.schema import ProcessTiming


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a SQLite file")
    args = parser.parse_args()
    store = Store(f"sqlite:///{args.store}", create=False)
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    phases: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    startups: dict[str, list[float]] = defaultdict(list)
    machines: dict[str, list[ProcessTiming]] = defaultdict(list)
    for result in store.cells():  # a cell's latest attempt holds every process it kept
        gpu = result.provenance.gpu.uuid if result.provenance.gpu and result.provenance.gpu.uuid else "cpu"
        latency = result.metrics.latency
        processes = (latency.processes + latency.other_series) if latency is not None else []
        for process in processes:  # older stores name the host of the attempt only, which its processes share
            machines[process.host or result.provenance.hostname or "?"].append(process)
        timed = [process for process in processes if process.launched_at and process.ended_at]
        for process in timed:
            span = (process.ended_at - process.launched_at).total_seconds()
            spans[gpu].append((process.launched_at, process.ended_at))
            compile_s = process.compile_s or 0.0
            startup_s = process.startup_s or 0.0
            phases[gpu]["start-up"] += startup_s
            phases[gpu]["compile"] += compile_s
            phases[gpu]["timed calls and after"] += max(span - startup_s - compile_s, 0.0)
            startups[result.job.info.kind].append(startup_s)
        if not timed and result.provenance.started_at and result.provenance.ended_at and result.status != "ok":
            spans[gpu].append((result.provenance.started_at, result.provenance.ended_at))
            phases[gpu][f"{result.status} (no timed calls)"] += (
                result.provenance.ended_at - result.provenance.started_at).total_seconds()
    if not spans:
        print("no process spans in this store (written before ProcessTiming.launched_at)")
        return
    begin = min(start for gpu_spans in spans.values() for start, _ in gpu_spans)
    end = max(stop for gpu_spans in spans.values() for _, stop in gpu_spans)
    wall = (end - begin).total_seconds()
    print(f"sweep wall time (first launch to last end, over every call): {wall:,.0f} s\n")
    print("| GPU | processes | busy s | idle s | busy % | " + " | ".join(sorted({p for v in phases.values() for p in v}))
          + " |")
    names = sorted({p for v in phases.values() for p in v})
    print("|---|---:|---:|---:|---:|" + "---:|" * len(names))
    for gpu in sorted(spans):
        busy = _union_seconds(spans[gpu])
        print(f"| {gpu} | {len(spans[gpu])} | {busy:,.0f} | {wall - busy:,.0f} | {100 * busy / wall:.0f} % | "
              + " | ".join(f"{phases[gpu].get(name, 0.0):,.0f}" for name in names) + " |")
    print()
    for kind, values in sorted(startups.items()):
        print(f"- {kind}: median start-up (launch to first timed call, compile excluded) "
              f"{statistics.median(values):.2f} s over {len(values)} processes")
    print()
    _print_machines(machines)


def _print_machines(machines: dict[str, list[ProcessTiming]]) -> None:
    """Per host: its processes, how many compiled into an empty cache (cold) or found it filled (warm), and their
    first and last launch (UTC)."""
    print("| host | processes | cold | warm | first launch | last launch |")
    print("|---|---:|---:|---:|---|---|")
    for host, processes in sorted(machines.items()):
        launches = sorted(process.launched_at for process in processes if process.launched_at is not None)
        span = " | ".join(f"{at:%Y-%m-%d %H:%M:%S}" for at in (launches[0], launches[-1])) if launches else "– | –"
        caches = Counter(process.compile_cache for process in processes)
        print(f"| {host} | {len(processes)} | {caches['cold']} | {caches['warm']} | {span} |")


def _union_seconds(spans: list[tuple[datetime, datetime]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, stop in sorted(spans):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += (current_end - current_start).total_seconds()
            current_start, current_end = start, stop
        else:
            current_end = max(current_end, stop)
    if current_end is not None:
        total += (current_end - current_start).total_seconds()
    return total


if __name__ == "__main__":
    main()
