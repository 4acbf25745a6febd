"""Everything one report shows, computed once and rendered by the terminal, HTML and Markdown writers."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from mlcbench.orchestrator.reports.data import (CheckRow, Comparison, CostRow, DecodeLine, PerfRow, ProvenanceRow,
                                                Selection, SupportMatrix, ThroughputTable, comparisons_in, cost_rows,
                                                SpreadRow, decode_lines, failed_checks, perf_rows, provenance_rows,
                                                spread_rows,
                                                support_matrices, throughput_tables)
from mlcbench.orchestrator.reports.p3 import P3Row, p3_rows
from mlcbench.schema import Calibration, Result


@dataclass(frozen=True)
class Report:
    source: str
    selection: Selection
    generated_at: datetime
    results: int
    perf: tuple[PerfRow, ...]
    tables: tuple[ThroughputTable, ...]
    costs: tuple[CostRow, ...]
    decode: tuple[DecodeLine, ...]
    support: tuple[SupportMatrix, ...]
    failed_checks: tuple[CheckRow, ...]
    provenance: tuple[ProvenanceRow, ...]
    p3: tuple[P3Row, ...]
    comparisons: tuple[Comparison, ...]
    calibrations: tuple[Calibration, ...] = ()
    spread: tuple[SpreadRow, ...] = ()


def build_report(results: list[Result], source: str, selection: Selection,
                 attempts: Optional[list[Result]] = None, calibrations: tuple[Calibration, ...] = ()) -> Report:
    """A report of each cell's result; `attempts` (every stored run of those cells) adds compile cost cold and warm;
    `calibrations`, the ceilings the sweeps measured."""
    perf = perf_rows(results, calibrations)
    return Report(
        source=source, selection=selection, generated_at=datetime.now(timezone.utc), results=len(results),
        perf=tuple(perf), tables=tuple(throughput_tables(perf)), costs=tuple(cost_rows(results, attempts)),
        decode=tuple(decode_lines(results, calibrations)),
        support=tuple(support_matrices(results)), failed_checks=tuple(failed_checks(results)),
        provenance=tuple(provenance_rows(results)), p3=tuple(p3_rows(perf)), comparisons=tuple(comparisons_in(perf)),
        calibrations=calibrations, spread=tuple(spread_rows(results)))
