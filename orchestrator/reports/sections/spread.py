"""Between-process spread of the synthetic cells: max / min of the process medians, of the whole call and of the
device time of the same processes (the spread decides whether device time is the figure that discriminates)."""

from dataclasses import dataclass
from statistics import median
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import CellKey, device_timing, kind_of, workflow_order
from mlcbench.orchestrator.reports.table import Column, Section, table_section, text_cells
from mlcbench.schema import Result


@dataclass(frozen=True)
class SpreadRow(CellKey):
    """How far a synthetic cell's processes land apart: max / min of their medians, of the whole call and of the
    device time (the GPU time of one call) of the same processes."""

    processes: int
    whole_call: float
    device: Optional[float]  # None where the cell has no device time
    device_method: Optional[str]


def _max_over_min(samples: Iterable[list[float]]) -> Optional[float]:
    medians = [median(calls) for calls in samples if calls]
    return max(medians) / min(medians) if len(medians) > 1 and min(medians) > 0 else None


def spread_rows(results: Iterable[Result]) -> list[SpreadRow]:
    """Synthetic cells measured in two processes or more (their spread is what decides whether device time is the
    figure that discriminates)."""
    rows = []
    for result in results:
        latency, job = result.metrics.latency, result.job
        if result.status != "ok" or latency is None or kind_of(job) != "synthetic":
            continue
        whole_call = _max_over_min(p.samples_ms for p in latency.processes)
        if whole_call is None:
            continue
        device = device_timing(latency)
        rows.append(SpreadRow(**vars(CellKey.of(result)), processes=len(latency.processes), whole_call=whole_call,
                              device=_max_over_min(p.samples_ms for p in device.processes) if device else None,
                              device_method=latency.device_method))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.precision, r.batch))


COLUMNS = (Column("model"), Column("workflow"), Column("gpu"), Column("env"), Column("precision"),
           Column("batch", numeric=True), Column("processes", numeric=True), Column("whole call max/min", numeric=True),
           Column("device time max/min", numeric=True))


def spread_section(rows: Iterable[SpreadRow]) -> Optional[Section]:
    return table_section(
        "Between-process spread of the synthetic cells",
        "max / min of the process medians: of the whole call, and of the device time of the same processes", COLUMNS,
        tuple(text_cells(row.model, row.workflow, row.gpu, row.env, row.precision, str(row.batch), str(row.processes),
                         f"{row.whole_call:.2f}×", "—" if row.device is None else
                         f"{row.device:.2f}× ({fmt.DEVICE_METHODS.get(row.device_method or '', '?')})")
              for row in rows))
