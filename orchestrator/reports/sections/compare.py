"""Comparisons: the same cells on two GPUs, in two envs, or in two stores (two sweeps), with each ratio's 95 %
interval and whether it is a finding; the host CPUs each side ran on."""

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Iterable, Literal, Optional

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import (RULES, VERDICT_PROCESSES, FigureName, PerfRow, across_gpus,
                                                ratio_label, time_ratio, workflow_order)
from mlcbench.orchestrator.reports.table import Cell, Column, Table, text_cells

Axis = Literal["gpu", "env", "store"]


@dataclass(frozen=True)
class CompareRow:
    """One workflow x model x batch measured on two GPUs (or in two envs); ratio = second / first."""

    workflow: str
    model: str
    precision: str
    batch: int
    fixed: str  # the env when GPUs are compared, the GPU when envs are
    unit: str
    first: Optional[float]
    second: Optional[float]
    first_status: Optional[str]
    second_status: Optional[str]
    # second / first with its 95 % interval (from both sides' process medians); None where a side failed its check
    change: Optional[stats.Ratio] = None
    flags: tuple[str, ...] = ()  # either side's (PerfRow.flags)
    figure: FigureName = "whole call"
    # why a side cannot carry a verdict ("n=1", "check failed", ...), for each side that ran
    first_no_verdict: Optional[str] = None
    second_no_verdict: Optional[str] = None
    # the two sides measured on two physical GPUs where the comparison is not of GPUs (two envs, two stores)
    across_gpus: Optional[str] = None
    options: str = ""  # the options the cell set away from their defaults (JobSpec.workflow_label), in words
    # second's joules per call / first's with its 95 % interval (the GPU's energy counter over the timed calls); None
    # where a side has no energy figure
    energy_change: Optional[stats.Ratio] = None

    @property
    def workflow_label(self) -> str:
        """The workflow with its settings: two rows of one workflow with other options are other cells."""
        return f"{self.workflow} [{self.options}]" if self.options else self.workflow

    @property
    def ratio(self) -> Optional[float]:
        if self.checks_failed:
            return None
        return self.second / self.first if self.first and self.second is not None else None

    @property
    def checks_failed(self) -> bool:
        return "check failed" in (self.first_no_verdict, self.second_no_verdict)

    @property
    def verdict(self) -> bool:
        """Both sides ran with enough processes and passed their checks: a difference here is a finding."""
        return self.ratio is not None and self.first_no_verdict is None and self.second_no_verdict is None

    def label(self) -> str:
        if self.checks_failed:
            return "— (check failed: no ratio)"
        if self.change is None or self.change.significant is None:
            text = "—" if self.ratio is None else f"{self.ratio:.2f}× (no interval)"
        else:
            text = ratio_label(self.change)
        if self.ratio is None:
            return text
        if self.figure == "device time":
            text += " on device time"
        if self.across_gpus:
            text += f", {self.across_gpus}"
        evidence = [why for why in (self.first_no_verdict, self.second_no_verdict) if why]
        return text + (f" ({', '.join(dict.fromkeys(evidence))}, no verdict)" if evidence else "")


@dataclass(frozen=True)
class HostCpu:
    """The CPU a result's worker ran on; None where the result did not record it (stored before it was)."""

    model: Optional[str]
    cpus: Optional[int]

    @property
    def known(self) -> bool:
        return self.model is not None or self.cpus is not None

    def describe(self) -> str:
        if not self.known:
            return "unknown"
        return f"{self.model or 'unknown CPU'}, {'unknown number of' if self.cpus is None else self.cpus} CPUs"


@dataclass(frozen=True)
class SideHosts:
    """The host CPUs one side of a comparison measured its figures on (its results that ran ok)."""

    side: str
    hosts: frozenset[HostCpu]

    def describe(self) -> str:
        if not self.hosts:
            return f"{self.side}: no result ran ok"
        ordered = sorted(self.hosts, key=lambda host: (host.model or "", host.cpus or 0))
        return f"{self.side}: host{'s' if len(ordered) > 1 else ''} " + "; ".join(h.describe() for h in ordered)


@dataclass(frozen=True)
class Comparison:
    axis: Axis
    first: str
    second: str
    rows: tuple[CompareRow, ...]
    hosts: tuple[SideHosts, SideHosts]
    # two stores of the same cells: whether one side's processes land closer together (stats.spread_comparison)
    spread: Optional[stats.SpreadComparison] = None

    @property
    def hosts_differ(self) -> bool:
        """Both sides recorded their host CPUs, and not the same ones."""
        first, second = (frozenset(host for host in side.hosts if host.known) for side in self.hosts)
        return bool(first) and bool(second) and first != second

    @property
    def title(self) -> str:
        return f"{self.second} / {self.first} ({ {'gpu': 'GPU', 'env': 'env', 'store': 'store'}[self.axis]})"

    @property
    def judged(self) -> int:
        """Rows that can carry a verdict and have an interval to judge by."""
        return sum(1 for row in self.rows if row.verdict and row.change is not None
                   and row.change.significant is not None)

    @property
    def significant(self) -> int:
        """Judged rows whose two sides differ."""
        return sum(1 for row in self.rows if row.verdict and row.change is not None and row.change.significant)

    @property
    def flagged(self) -> int:
        return sum(1 for row in self.rows if row.flags)

    def summary(self) -> str:
        compared = sum(1 for row in self.rows if row.ratio is not None)
        return (f"{compared} of {len(self.rows)} row(s) ran ok on both sides with no failed check; {self.significant} "
                f"of {self.judged} judged (≥ {VERDICT_PROCESSES} processes and a passed check on both sides, with "
                f"intervals) differ significantly (95 % intervals: about 1 in 20 would by chance alone); "
                f"{self.flagged} of {len(self.rows)} row(s) flagged ⚠.{self._spread_summary()} {RULES}")

    def _spread_summary(self) -> str:
        spread = self.spread
        if spread is None:
            return ""
        low, high = spread.ratio_interval
        return (f" Between processes (each process's median whole call, {spread.cells} cell(s) with ≥ "
                f"{VERDICT_PROCESSES} processes a side): {self.second} spread {spread.ratio:.2f}× "
                f"[{low:.2f}–{high:.2f}] as far as {self.first} (log SD {spread.second_sd:.3f} against "
                f"{spread.first_sd:.3f}; narrower in "
                f"{spread.narrower_cells} of {spread.cells} cell(s); Brown–Forsythe p = {spread.p_value:.2g}): "
                f"{spread.verdict}.")


def _energy_change(a: Optional[PerfRow], b: Optional[PerfRow]) -> Optional[stats.Ratio]:
    if a is None or b is None or a.value is None or b.value is None or a.check_failed or b.check_failed:
        return None
    return stats.energy_ratio(a.result.metrics.latency, b.result.metrics.latency)  # type: ignore[arg-type]


def _change(a: Optional[PerfRow], b: Optional[PerfRow]) -> tuple[Optional[stats.Ratio], FigureName]:
    """b's figure over a's, from the times (a figure is inversely proportional to its time), on the figure that
    discriminates (time_ratio)."""
    if a is None or b is None or a.value is None or b.value is None:
        return None, "whole call"
    first, second = a.result.metrics.latency, b.result.metrics.latency
    return time_ratio(first, second) if first and second else (None, "whole call")


Sides = dict[tuple[str, str, str, int, str, str], dict[str, PerfRow]]


def compare(rows: Iterable[PerfRow], axis: Axis, first: str, second: str) -> Comparison:
    """Two GPUs or two envs of one store; everything else must match, settings included."""
    sides: Sides = defaultdict(dict)
    for row in rows:
        side, fixed = (row.gpu, row.env) if axis == "gpu" else (row.env, row.gpu)
        if side in (first, second):
            sides[(row.workflow, row.model, row.precision, row.batch, fixed, row.settings)][side] = row
    return _comparison(axis, first, second, sides)


def compare_stores(first_rows: Iterable[PerfRow], second_rows: Iterable[PerfRow], first: str,
                   second: str) -> Comparison:
    """The same cells (GPU, env, model, workflow, precision, batch, settings) in two stores: two sweeps."""
    sides: Sides = defaultdict(dict)
    for side, rows in ((first, first_rows), (second, second_rows)):
        for row in rows:
            sides[(row.workflow, row.model, row.precision, row.batch, f"{row.env} @ {row.gpu}", row.settings)][side] = row
    comparison = _comparison("store", first, second, sides)
    return replace(comparison, spread=stats.spread_comparison(
        [(by_side[first].result.metrics.latency.processes, by_side[second].result.metrics.latency.processes)
         for by_side in sides.values() if all(_timed(by_side.get(side)) for side in (first, second))],
        least=VERDICT_PROCESSES))


def _timed(row: Optional[PerfRow]) -> bool:
    return row is not None and row.status == "ok" and row.result.metrics.latency is not None


def _comparison(axis: Axis, first: str, second: str, sides: Sides) -> Comparison:
    compared = []
    hosts: dict[str, set[HostCpu]] = {first: set(), second: set()}
    for (workflow, model, precision, batch, fixed, _), by_side in sides.items():
        a, b = by_side.get(first), by_side.get(second)
        for side, row in by_side.items():
            if row.status == "ok":
                hosts[side].add(HostCpu(row.result.provenance.host_cpu, row.result.provenance.host_cpus))
        change, figure = _change(a, b)
        compared.append(CompareRow(workflow, model, precision, batch, fixed, (a or b).unit,  # type: ignore[union-attr]
                                   a.value if a else None, b.value if b else None,
                                   a.status if a else None, b.status if b else None, change,
                                   tuple(flag for row in (a, b) if row for flag in row.flags()), figure,
                                   a.no_verdict if a and a.value is not None else None,
                                   b.no_verdict if b and b.value is not None else None,
                                   across_gpus(a.result, b.result) if a and b and axis != "gpu" else None,
                                   (a or b).result.job.options.non_default(),  # type: ignore[union-attr]
                                   _energy_change(a, b)))
    compared.sort(key=lambda r: (r.model, r.fixed, workflow_order(r.workflow), r.precision, r.batch))
    return Comparison(axis, first, second, tuple(compared),
                      (SideHosts(first, frozenset(hosts[first])), SideHosts(second, frozenset(hosts[second]))))


def comparisons_in(rows: list[PerfRow]) -> list[Comparison]:
    """Every other GPU against the first, every other env against the first: what the HTML report compares when the
    store holds more than one."""
    found = []
    for axis in ("gpu", "env"):
        values = sorted({row.gpu if axis == "gpu" else row.env for row in rows})
        found += [compare(rows, axis, values[0], other) for other in values[1:]]  # type: ignore[arg-type]
    return [comparison for comparison in found if any(r.ratio is not None for r in comparison.rows)]


# what stays the same along a row, by what the comparison sets side by side
FIXED = {"gpu": "env", "env": "gpu", "store": "env @ gpu"}


def _figure(value: Optional[float], status: Optional[str]) -> str:
    return fmt.number(value, 2) if value is not None else status or "not run"


def comparison_table(comparison: Comparison) -> Table:
    energy = any(row.energy_change is not None for row in comparison.rows)  # a column only where a row has one
    columns = (Column("model"), Column("workflow"), Column("batch", numeric=True), Column(FIXED[comparison.axis]),
               Column("unit"), Column(comparison.first, numeric=True), Column(comparison.second, numeric=True),
               Column("ratio [95 % interval]", numeric=True),
               *([Column("energy ratio [95 % interval]", numeric=True)] if energy else []), Column("flags"))
    rows = tuple((*text_cells(row.model, row.workflow_label, str(row.batch), row.fixed, row.unit,
                              _figure(row.first, row.first_status), _figure(row.second, row.second_status),
                              row.label()),
                  *(text_cells(ratio_label(row.energy_change) if row.energy_change else "—") if energy else ()),
                  Cell(", ".join(row.flags), tone="flagged" if row.flags else None)) for row in comparison.rows)
    caption = "each side's figure and their ratio, second / first; ≈: the interval holds 1.0"
    if energy:
        caption += "; energy ratio: second's joules per call / first's (below 1: the second takes less energy)"
    return Table(comparison.title, caption, columns, rows)
