"""Two GPUs of two generations: how much each workflow gains, against what the hardware alone predicts.

A workflow bound by memory bandwidth gains the ratio of the GPUs' bandwidths; one bound by compute gains the ratio of
their peaks; one bound by the host (Python, launches) gains neither, or whatever the hosts differ by. Between the
H100 and the H200 (same chip, 3.35 vs 4.8 TB/s, the same peaks) the two predictions are 1.43x and 1.0x, so where a
workflow lands between them says what bounds it."""

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import workflow_order
from mlcbench.orchestrator.reports.sections.compare import Comparison, CompareRow, comparison_table
from mlcbench.orchestrator.reports.table import Block, Column, Paragraph, Section, Table, text_cells
from mlcbench.schema import GPUS


@dataclass(frozen=True)
class Prediction:
    bandwidth: float  # second / first
    peak: float


def prediction(first: str, second: str, precision: str) -> Optional[Prediction]:
    a, b = GPUS.get(first), GPUS.get(second)
    if a is None or b is None:
        return None
    peak_a, peak_b = a.peak_tflops(precision), b.peak_tflops(precision)
    if not peak_a or not peak_b:
        return None
    return Prediction(bandwidth=b.bandwidth_gbs / a.bandwidth_gbs, peak=peak_b / peak_a)


@dataclass(frozen=True)
class _Cell:
    ratio: float
    low: Optional[float]  # None at both ends where the cell has no interval
    high: Optional[float]
    no_verdict: tuple[str, ...]  # why a side cannot carry a verdict ("n=1", "not checked")


def _cell(row: CompareRow) -> Optional[_Cell]:
    """The cell's ratio with its 95 % interval, and why it cannot carry a verdict where it cannot."""
    if row.ratio is None:
        return None
    why = tuple(reason for reason in (row.first_no_verdict, row.second_no_verdict) if reason)
    change = row.change
    if change is None or change.low is None or change.high is None:
        return _Cell(row.ratio, None, None, why)
    return _Cell(change.value, change.low, change.high, why)


NOT_MEMORY_BOUND = "not memory-bound"
BEYOND_BANDWIDTH = "beyond the bandwidth ratio"


def verdict(low: float, high: float, expected: Prediction) -> str:
    """Which prediction the gain follows, judged on a log scale around their geometric midpoint."""
    if math.isclose(expected.bandwidth, expected.peak, rel_tol=0.05):
        return "no verdict: the two GPUs' bandwidth and peak ratios are alike"
    bandwidth_side = expected.bandwidth > expected.peak
    midpoint = math.sqrt(expected.bandwidth * expected.peak)
    above, below = low > midpoint, high < midpoint
    if (above and bandwidth_side) or (below and not bandwidth_side):
        beyond = low > expected.bandwidth * 1.05 if bandwidth_side else high < expected.bandwidth / 1.05
        return f"{BEYOND_BANDWIDTH}: the hosts or clocks differ" if beyond else "memory-bound"
    if above or below:
        return f"{NOT_MEMORY_BOUND}: follows the peaks (compute) or neither (host)"
    return "between the two: mixed, or noise"


@dataclass(frozen=True)
class GenerationRow:
    """One workflow at one batch size over the models of one kind: the geometric mean of the cells' ratios, with the
    geometric means of their interval ends (wider than the mean's own interval: a conservative bound), or no interval
    (low = high = ratio) where a cell has none; its verdict then reads a point estimate and says so. Where a cell
    cannot carry a verdict (fewer than 3 processes on a side, no passed check), it is no verdict, and says what the
    figures read."""

    kind: str
    workflow: str
    batch: int
    cells: int
    ratio: float
    low: float
    high: float
    expected: Prediction
    verdict: str

    @property
    def has_interval(self) -> bool:
        return self.low != self.high

    def gain(self) -> str:
        interval = f" [{self.low:.2f}–{self.high:.2f}]" if self.has_interval else " (no interval)"
        return f"{self.ratio:.2f}×{interval}"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def generation_rows(comparison: Comparison) -> list[GenerationRow]:
    """Per workflow, model kind and batch size: the gain from comparison.first to comparison.second, or nothing when
    the comparison is not between two catalogued GPUs."""
    if comparison.axis != "gpu":
        return []
    groups: dict[tuple[str, str, int, Prediction], list[_Cell]] = defaultdict(list)
    for row in comparison.rows:
        expected, cell = prediction(comparison.first, comparison.second, row.precision), _cell(row)
        if expected is not None and cell is not None and cell.ratio > 0:
            groups[("llm" if row.unit == "tok/s" else "synthetic", row.workflow, row.batch, expected)].append(cell)
    rows = []
    for (kind, workflow, batch, expected), cells in groups.items():
        ratio = _geomean([cell.ratio for cell in cells])
        if all(cell.low is not None and cell.high is not None for cell in cells):
            low, high = _geomean([cell.low for cell in cells]), _geomean([cell.high for cell in cells])  # type: ignore
            says, reads = verdict(low, high, expected), "the interval"
        else:
            low = high = ratio
            says, reads = verdict(ratio, ratio, expected), "the point estimate (a cell has no interval)"
        why = sorted({reason for cell in cells for reason in cell.no_verdict})
        if why:
            says = f"no verdict ({', '.join(why)} in a cell); {reads} reads: {says}"
        elif low == high:
            says = f"{says} (a point estimate: a cell has no interval)"
        rows.append(GenerationRow(kind, workflow, batch, len(cells), ratio, low, high, expected, says))
    return sorted(rows, key=lambda r: (r.kind, workflow_order(r.workflow), r.batch))


def host_lines(comparison: Comparison) -> list[str]:
    """Between two GPUs: the host CPUs each side ran on, one line per GPU, and a warning when they differ (a
    host-bound workflow's gain then may be the host's)."""
    if comparison.axis != "gpu":
        return []
    lines = [side.describe() for side in comparison.hosts]
    if comparison.hosts_differ:
        lines.append(f"{comparison.first} and {comparison.second} ran on different host CPUs: the gains of host-bound "
                     f"workflows (eager LLM generate(), rows marked \"{NOT_MEMORY_BOUND}\" or "
                     f"\"{BEYOND_BANDWIDTH}\") may come from the host, not the GPU")
    return lines


def generation_table(rows: list[GenerationRow], first: str, second: str) -> Table:
    return Table(f"{second} / {first} per workflow", "the gain against the ratios of bandwidth and of peak",
                 (Column("kind"), Column("workflow"), Column("batch", numeric=True), Column("cells", numeric=True),
                  Column("gain", numeric=True), Column("bandwidth ratio", numeric=True),
                  Column("peak ratio", numeric=True), Column("what bounds it")),
                 tuple(text_cells(row.kind, row.workflow, str(row.batch), str(row.cells), row.gain(),
                                  fmt.ratio(row.expected.bandwidth), fmt.ratio(row.expected.peak), row.verdict)
                       for row in rows))


def comparison_blocks(comparison: Comparison) -> tuple[Block, ...]:
    """A comparison as `compare` prints it and a report shows it: the hosts, the table, between two GPUs each
    workflow's gain against what the hardware predicts, and the count of findings."""
    generations = generation_rows(comparison)
    return (*(Paragraph(line) for line in host_lines(comparison)), comparison_table(comparison),
            *([generation_table(generations, comparison.first, comparison.second)] if generations else []),
            Paragraph(comparison.summary()))


def comparisons_section(comparisons: Iterable[Comparison]) -> Optional[Section]:
    blocks = tuple(block for comparison in comparisons for block in comparison_blocks(comparison))
    return Section("Across GPUs and envs", blocks, figures="compare") if blocks else None
