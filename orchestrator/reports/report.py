"""Everything one report shows, computed once from the results (pure), as the sections every writer renders in the
same order: the terminal, Markdown and HTML writers only render them."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from mlcbench.orchestrator.reports.data import PerfRow, perf_rows
from mlcbench.orchestrator.reports.sections.ablation import Ablation, ablation_section, ablations
from mlcbench.orchestrator.reports.sections.ceilings import ceilings_section
from mlcbench.orchestrator.reports.sections.checks import (CheckRow, TimedTokensRow, checks_section, failed_checks,
                                                           timed_tokens_rows)
from mlcbench.orchestrator.reports.sections.compare import Comparison, comparisons_in
from mlcbench.orchestrator.reports.sections.costs import CostRow, cost_rows, costs_section
from mlcbench.orchestrator.reports.sections.crossgen import comparisons_section
from mlcbench.orchestrator.reports.sections.decode import DecodeLine, decode_lines, decode_section
from mlcbench.orchestrator.reports.sections.p3 import P3Row, p3_rows, p3_section
from mlcbench.orchestrator.reports.sections.provenance import ProvenanceRow, provenance_rows, provenance_section
from mlcbench.orchestrator.reports.sections.spread import SpreadRow, spread_rows, spread_section
from mlcbench.orchestrator.reports.sections.support import SupportMatrix, support_matrices, support_section
from mlcbench.orchestrator.reports.sections.throughput import ThroughputTable, throughput_sections, throughput_tables
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.reports.table import Section
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
    ablations: tuple[Ablation, ...] = ()
    timed_tokens: tuple[TimedTokensRow, ...] = ()

    @property
    def heading(self) -> str:
        return f"{self.results} result(s) from {self.source}; selection: {self.selection.describe()}"

    def sections(self) -> list[Section]:
        """What every writer shows, in this order (a section with nothing to show is left out)."""
        found = [support_section(self.support), *throughput_sections(self.tables), costs_section(self.costs),
                 spread_section(self.spread), decode_section(self.decode), ablation_section(self.ablations), checks_section(self.failed_checks, self.timed_tokens),
                 comparisons_section(self.comparisons), p3_section(self.p3), ceilings_section(self.calibrations),
                 provenance_section(self.provenance)]
        return [section for section in found if section is not None]


def build_report(results: list[Result], source: str, selection: Selection,
                 attempts: Optional[list[Result]] = None, calibrations: tuple[Calibration, ...] = ()) -> Report:
    """A report of each cell's result; `attempts` (every stored run of those cells) adds compile cost cold and warm;
    `calibrations`, the ceilings the sweeps measured."""
    perf = perf_rows(results, calibrations, attempts or ())
    return Report(
        source=source, selection=selection, generated_at=datetime.now(timezone.utc), results=len(results),
        perf=tuple(perf), tables=tuple(throughput_tables(perf)), costs=tuple(cost_rows(results, attempts)),
        decode=tuple(decode_lines(results, calibrations)),
        support=tuple(support_matrices(results)), failed_checks=tuple(failed_checks(results)),
        provenance=tuple(provenance_rows(results)), p3=tuple(p3_rows(perf)), comparisons=tuple(comparisons_in(perf)),
        calibrations=calibrations, spread=tuple(spread_rows(results)), ablations=tuple(ablations(perf)),
        timed_tokens=tuple(timed_tokens_rows(results)))
