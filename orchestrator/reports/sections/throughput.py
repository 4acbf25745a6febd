"""Throughput: workflow x batch size per model, precision, settings, env and GPU (tokens/s or TFLOPS), each figure
with its interval, evidence, speedup over eager, % of its bounds and flags; the fastest workflow per batch size."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import (DEVICE_TIME_BELOW_MS, RULES, VERDICT_PROCESSES, WIDE_INTERVAL, Kind,
                                                PerfRow, across_gpus, device_timing, energy_of, hand_written,
                                                provenance_line, settings_label, time_ratio, workflow_order)
from mlcbench.orchestrator.reports.table import Cell, Column, Paragraph, Section, Table


@dataclass(frozen=True)
class ThroughputLine:
    workflow: str
    cells: dict[int, PerfRow]  # batch size -> result


@dataclass(frozen=True)
class Fastest:
    """Which workflow is fastest at one batch size of a table, judged only among cells that can carry a verdict."""

    batch: int
    workflow: Optional[str]  # None: no verdict, or the two fastest are within noise
    text: str


def fastest(batch: int, rows: Iterable[PerfRow]) -> Fastest:
    rows = list(rows)
    judged = [row for row in rows if row.no_verdict is None and not hand_written(row.workflow)]
    skipped = [f"{row.workflow} ({row.no_verdict or 'hand-written reference'})" for row in rows
               if row.value is not None and (row.no_verdict or hand_written(row.workflow))]
    tail = f"; not judged: {', '.join(skipped)}" if skipped else ""
    if not judged:
        return Fastest(batch, None, f"b{batch}: no verdict (no cell with ≥ {VERDICT_PROCESSES} processes and a "
                                    f"passed check){tail}")
    # ranked by the figure time_ratio judges them on: device time where every cell has it and one is under a ms
    timings = {id(row): row.result.metrics.latency for row in judged}
    device = {key: device_timing(timing) for key, timing in timings.items()}  # type: ignore[arg-type]
    on_device = (all(timing is not None for timing in device.values())
                 and min(timing.median_ms for timing in timings.values()) < DEVICE_TIME_BELOW_MS)  # type: ignore
    ranked = sorted(judged, key=lambda row: (device if on_device else timings)[id(row)].median_ms)  # type: ignore
    top = ranked[0]
    if len(ranked) == 1:
        return Fastest(batch, top.workflow, f"b{batch}: {top.workflow}, the only cell judged{tail}")
    runner_up = ranked[1]
    ratio, figure = time_ratio(runner_up.result.metrics.latency, top.result.metrics.latency)  # type: ignore[arg-type]
    on = " on device time" if figure == "device time" else ""
    across = across_gpus(top.result, runner_up.result)
    if across:
        on += f", {across}"
    if ratio.significant:
        return Fastest(batch, top.workflow, f"b{batch}: fastest {top.workflow}, {ratio.value:.2f}× "
                                            f"[{ratio.low:.2f}–{ratio.high:.2f}]{on} over {runner_up.workflow}{tail}")
    margin = ratio.equal_within
    if margin is not None and margin <= WIDE_INTERVAL:
        return Fastest(batch, None, f"b{batch}: no single fastest, {top.workflow} and {runner_up.workflow} are equal "
                                    f"within {100 * margin:.1f} %{on} [{ratio.low:.3f}–{ratio.high:.3f}]{tail}")
    return Fastest(batch, None, f"b{batch}: no single fastest, {top.workflow} and {runner_up.workflow} are within "
                                f"noise{on}{tail}")


@dataclass(frozen=True)
class ThroughputTable:
    """Workflow x batch size for one model at one precision and one set of settings, in one env on one GPU."""

    kind: Kind
    model: str
    precision: str
    gpu: str
    env: str
    settings: str  # settings_label of the table's cells
    batches: tuple[int, ...]
    lines: tuple[ThroughputLine, ...]
    fastest: tuple[Fastest, ...] = ()  # one per batch size

    @property
    def title(self) -> str:
        unit = "tokens/s" if self.kind == "llm" else "TFLOPS"
        return f"{self.model} ({self.precision}) on {self.gpu}, env {self.env}: {unit}; {self.settings}"


def throughput_tables(rows: Iterable[PerfRow]) -> list[ThroughputTable]:
    """One table per settings too: runs with different settings never share a cell."""
    groups: dict[tuple, list[PerfRow]] = defaultdict(list)
    for row in rows:
        groups[(row.kind, row.model, row.precision, row.gpu, row.env, row.settings)].append(row)
    tables = []
    for (kind, model, precision, gpu, env, _), members in sorted(groups.items()):
        by_workflow: dict[str, dict[int, PerfRow]] = defaultdict(dict)
        for row in members:
            by_workflow[row.workflow][row.batch] = row
        lines = tuple(ThroughputLine(w, by_workflow[w]) for w in sorted(by_workflow, key=workflow_order))
        batches = tuple(sorted({row.batch for row in members}))
        tables.append(ThroughputTable(kind, model, precision, gpu, env, settings_label(members[0].result.job), batches,
                                      lines, tuple(fastest(b, [r for r in members if r.batch == b]) for b in batches)))
    return tables


def _cell(row: Optional[PerfRow]) -> Cell:
    if row is None:
        return Cell("")
    if row.value is None:
        return Cell(row.status, tone=row.status, tooltip=f"{row.reason or row.status} — {provenance_line(row.result)}")
    text, bounds = fmt.perf(row), fmt.bounds(row)
    if bounds:
        text += f", {bounds}" if row.step_time_missing else f", {bounds} bound"
    tooltip = provenance_line(row.result)
    if row.energy is not None:
        text += f"; {fmt.estimate(*row.energy)}"
    elif (energy := energy_of(row.result)) is not None and energy.reason:
        tooltip += f" — no energy figure: {energy.reason}"
    return Cell(text, tone="fail" if row.check_failed else "flagged" if row.flags() else None, tooltip=tooltip)


def throughput_table(table: ThroughputTable) -> Table:
    bound = "the decode bandwidth bound at the timed calls' step time" if table.kind == "llm" else "peak"
    with_bounds = any(fmt.bounds(row) for line in table.lines for row in line.cells.values())
    with_energy = any(row.energy for line in table.lines for row in line.cells.values())
    caption = ("value [95 % interval], the processes it combines, speedup over eager"
               + (f", % of {bound} (spec / measured)" if with_bounds else "")
               + ("; energy " + ("per generated token" if table.kind == "llm" else "per call") + " [95 % interval]"
                  if with_energy else "")
               + "; ≈ = not significant; ✗ = correctness check failed; ⚠ flags a figure not to trust")
    return Table(table.title, caption, (Column("workflow"), *(Column(f"batch {b}", numeric=True) for b in table.batches)),
                 tuple((Cell(line.workflow), *(_cell(line.cells.get(b)) for b in table.batches))
                       for line in table.lines),
                 notes=tuple(verdict.text for verdict in table.fastest))


LEGEND = ("[a–b]: the 95 % interval (Student's t over the worker processes' medians). warm / cold / pooled: the "
          "processes the figure combines (warm: caches filled; cold: compiled into empty caches, where no warm process "
          "ran; pooled: both, where a test found no difference). device time: the figure at the GPU time of one call "
          "without the host's launch cost (a CUDA-graph replay of the call, or the profiler's kernel sum where the "
          "workflow allows no graph). ≈ (not significant): the speedup's interval holds 1.0; ≈ [a–b] (equal within "
          "x %): it holds 1.0 and no difference wider than x % (at most 5 %), so the two are the same. not compiled: the "
          "workflow compiled no graph, so it ran eager code. x % / y % of bound: of the catalog's spec, then of what "
          "the sweep measured on the GPU (synthetic: peak TFLOPS and a large matmul; LLM: the bytes a decode step "
          "reads, weights + KV cache, per decode step of the timed calls, against the spec bandwidth and a "
          "device-to-device copy; no step time: stored before it was recorded). J/token (LLM) / J/call: the GPU's "
          "energy over the timed calls, from NVML's energy counter read at the edges of each process's timed window "
          "(given where the window spans at least 20 of the counter's updates), over the figure's processes. " + RULES)


def throughput_sections(tables: Iterable[ThroughputTable]) -> list[Section]:
    """One section per model kind (LLM, synthetic); the legend and the rules under the last."""
    tables = list(tables)
    # the GPU's peak only where a result ran on a catalogued GPU (never for a CPU run)
    with_peak = any(row.kind == "synthetic" and row.efficiency is not None
                    for table in tables for line in table.lines for row in line.cells.values())
    sections = []
    for kind, heading in (("llm", "LLM throughput (tokens/s)"),
                          ("synthetic", "Synthetic models (TFLOPS)" + (", with the GPU's peak" if with_peak else ""))):
        mine = [throughput_table(table) for table in tables if table.kind == kind]
        if mine:
            sections.append(Section(heading, tuple(mine), figures=kind))  # type: ignore[arg-type]
    if sections:
        last = sections[-1]
        sections[-1] = Section(last.heading, (*last.blocks, Paragraph(LEGEND)), last.figures)
    return sections
