"""Compile cost and peak memory: per cell that ran ok (a workflow with its options, on a model at one precision and
batch, in one env on one GPU: one program, never a median over variants or batches that compile different ones);
compile time with the caches empty (cold) and full (warm), each with the processes behind it."""

from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Iterable, Literal, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import CellKey, workflow_order
from mlcbench.orchestrator.reports.table import Cell, Column, Section, table_section, text_cells
from mlcbench.schema import ProcessTiming, Result


@dataclass(frozen=True)
class CostRow(CellKey):
    """Compile time and peak memory of one cell."""

    options: str  # the workflow's options set away from their defaults, in words ("" for none)
    compile_s_median: Optional[float]
    compile_s_max: Optional[float]
    # cold: compiles that found nothing in the caches; warm: that found every graph there (cost_rows: how they are
    # combined), each with the number of processes behind it
    compile_cold_s: Optional[float]
    compile_warm_s: Optional[float]
    load_s_median: Optional[float]
    compiler_import_s_median: Optional[float]  # over its processes: once each, outside compile_s
    peak_mem_bytes: Optional[int]
    compile_cold_n: int = 0
    compile_warm_n: int = 0
    # its processes that compiled beside others on their GPU (--overlap), on how many of the host's cores, and the
    # seconds they stood stopped while a neighbour timed (taken out of their compile times)
    beside_n: int = 0
    beside_cpus: Optional[int] = None
    beside_stopped_s: float = 0.0


def _ok_by_cell(results: Iterable[Result]) -> dict[CellKey, list[Result]]:
    groups: dict[CellKey, list[Result]] = defaultdict(list)
    for result in results:
        if result.status == "ok":
            groups[CellKey.of(result)].append(result)
    return groups


def _processes(result: Result) -> list[ProcessTiming]:
    latency = result.metrics.latency
    return [*latency.processes, *latency.other_series] if latency else []


def _compiles(result: Result) -> list[tuple[float, Optional[str]]]:
    """(compile seconds, Inductor cache state) of each worker process of a result (one, for a single-process one),
    a series set aside included."""
    processes = _processes(result)
    measured = [(p.compile_s, p.compile_cache) for p in processes if p.compile_s is not None]
    if measured:
        return measured
    return [(result.metrics.compile_s, result.metrics.compile_cache)] if result.metrics.compile_s is not None else []


def _compiler_imports(result: Result) -> list[float]:
    """The compiler's import, in seconds, in each worker process of a result (its own figure, for a result that does
    not keep them per process)."""
    latency = result.metrics.latency
    processes = [*latency.processes, *latency.other_series] if latency else []
    measured = [p.compiler_import_s for p in processes if p.compiler_import_s is not None]
    if measured:
        return measured
    return [result.metrics.compiler_import_s] if result.metrics.compiler_import_s is not None else []


CompileState = Literal["cold", "warm"]


def compile_costs(result: Result) -> dict[CompileState, tuple[float, int]]:
    """(median seconds, processes) of a result's cold and of its warm compiles: as the host combined them over every
    process of the cell (Metrics.compile_cold / compile_warm, both series), else, for a result stored before, from
    its processes' own compile times."""
    metrics = result.metrics
    combined = {state: (cost.median_s, cost.n)
                for state, cost in (("cold", metrics.compile_cold), ("warm", metrics.compile_warm)) if cost}
    if combined:
        return combined  # type: ignore[return-value]
    by_state: dict[CompileState, list[float]] = defaultdict(list)
    for seconds, cache in _compiles(result):
        if cache in ("cold", "warm"):
            by_state[cache].append(seconds)  # type: ignore[index]
    return {state: (median(seconds), len(seconds)) for state, seconds in by_state.items()}


def _process_ids(result: Result) -> Optional[frozenset[tuple[str, int, int]]]:
    """Which worker processes a result holds (sweep, round, place in the round); None where one is not named."""
    latency = result.metrics.latency
    processes = [*latency.processes, *latency.other_series] if latency else []
    if not processes or any(process.sweep_id is None for process in processes):
        return None
    return frozenset((process.sweep_id, process.round, process.position) for process in processes)  # type: ignore


def _without_prefixes(attempts: Iterable[Result]) -> list[Result]:
    """The attempts, less each one that another attempt of the same cell holds whole: a cell resumed by a later
    sweep is stored again with the processes it resumed from, which would otherwise count twice."""
    named = [(result, _process_ids(result)) for result in attempts]
    return [result for result, own in named
            if own is None or not any(other is not None and other_result.job_id == result.job_id and own < other
                                      for other_result, other in named)]


def cost_rows(results: Iterable[Result], attempts: Optional[Iterable[Result]] = None) -> list[CostRow]:
    """Compile time and memory of each cell's result; the cold and warm compile times over every attempt given (a
    cell's first run compiled cold, its reruns warm, before a cell kept both series): the median over those results
    of each one's median, with the processes behind them."""
    groups = _ok_by_cell(results)
    tried = _ok_by_cell(results if attempts is None else _without_prefixes(attempts))
    rows = []
    for key, members in groups.items():
        compile_times = [r.metrics.compile_s for r in members if r.metrics.compile_s is not None]
        costs = [compile_costs(r) for r in tried[key]]
        by_cache = {state: [cost[state] for cost in costs if state in cost] for state in ("cold", "warm")}
        load_times = [r.metrics.load_s for r in members if r.metrics.load_s is not None]
        import_times = [seconds for r in members for seconds in _compiler_imports(r)]
        peaks = [r.metrics.peak_mem_bytes for r in members if r.metrics.peak_mem_bytes is not None]
        beside = [(p.compile_stopped_s, r.provenance.host_cpus) for r in members for p in _processes(r)
                  if p.compile_stopped_s is not None]
        rows.append(CostRow(
            **vars(key), options=members[0].job.options.non_default(),
            compile_s_median=median(compile_times) if compile_times else None,
            compile_s_max=max(compile_times) if compile_times else None,
            compile_cold_s=median(s for s, _ in by_cache["cold"]) if by_cache["cold"] else None,
            compile_warm_s=median(s for s, _ in by_cache["warm"]) if by_cache["warm"] else None,
            load_s_median=median(load_times) if load_times else None,
            compiler_import_s_median=median(import_times) if import_times else None,
            peak_mem_bytes=max(peaks) if peaks else None,
            compile_cold_n=sum(n for _, n in by_cache["cold"]), compile_warm_n=sum(n for _, n in by_cache["warm"]),
            beside_n=len(beside), beside_cpus=min((cpus for _, cpus in beside if cpus), default=None),
            beside_stopped_s=sum(stopped for stopped, _ in beside)))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.options, r.precision,
                                       r.batch, r.settings))


COLUMNS = (Column("model"), Column("workflow"), Column("options"), Column("precision"), Column("batch", numeric=True),
           Column("gpu"), Column("env"), Column("compile s (median)", numeric=True),
           Column("compile s (max)", numeric=True), Column("cold / warm s (processes)", numeric=True),
           Column("load s (median)", numeric=True), Column("compiler import s", numeric=True),
           Column("peak memory", numeric=True), Column("beside others"))


def _cells(row: CostRow) -> tuple[Cell, ...]:
    return text_cells(row.model, row.workflow, row.options or "defaults", row.precision, str(row.batch), row.gpu,
                      row.env, fmt.number(row.compile_s_median), fmt.number(row.compile_s_max),
                      fmt.cold_warm(row.compile_cold_s, row.compile_cold_n, row.compile_warm_s, row.compile_warm_n),
                      fmt.number(row.load_s_median), fmt.number(row.compiler_import_s_median),
                      fmt.gigabytes(row.peak_mem_bytes), _beside(row))


def _beside(row: CostRow) -> str:
    if not row.beside_n:
        return "—"
    cores = f" on {row.beside_cpus} cores" if row.beside_cpus else ""
    return f"{row.beside_n} process(es){cores}, {row.beside_stopped_s:.1f} s stopped taken out"


def costs_section(rows: Iterable[CostRow]) -> Optional[Section]:
    return table_section(
        "Compile time and peak memory", "one row per cell that ended ok (one program: its options, precision and "
        "batch); compile: the first call, compile included; cold / warm: "
        "the compile caches empty / full, the median over that many processes; compiler import: the workflow's "
        "compiler imported before the model is built, once a process, caches or not (not in the compile times); "
        "beside others: processes that compiled while others shared their GPU (--overlap), on their share of the "
        "host's cores, the time they stood stopped while a neighbour timed taken out of their compile times",
        COLUMNS, tuple(_cells(row) for row in rows))
