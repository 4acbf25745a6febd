"""The ablation of a workflow's techniques (the catalog's WorkflowInfo.techniques, e.g. torch_compile_decode's fused
projections and PDL): the cells of one workflow on one model, GPU, env, precision and batch that differ only in which
techniques ran, from none up, each with its figure, per-step time and bound, and its gain over the rung below it and over
the base, with their intervals."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import PerfRow, ratio_label, time_ratio
from mlcbench.orchestrator.reports.table import Cell, Column, Section, Table, text_cells
from mlcbench.schema import WORKFLOWS, Result


@dataclass(frozen=True)
class Rung:
    row: PerfRow
    techniques: tuple[str, ...]  # the techniques this cell ran with, in the catalog's order


@dataclass(frozen=True)
class Ablation:
    title: str  # gpu, env, model, workflow, precision, batch
    rungs: tuple[Rung, ...]  # fewest techniques first


def techniques_run(result: Result) -> Optional[tuple[str, ...]]:
    """The techniques a result ran with, from what the worker recorded (Applied); None where the first was not
    recorded (a result stored before the options existed): such a cell cannot be placed on the ladder. One unrecorded
    after a recorded one was added to the catalog after the result was stored, so the result did not run it."""
    ran = []
    for index, technique in enumerate(WORKFLOWS[result.job.workflow].techniques):
        used = getattr(result.metrics.applied, technique)
        if used is None and index == 0:
            return None
        if used:
            ran.append(technique)
    return tuple(ran)


def _without_techniques(result: Result) -> str:
    """The cell's settings with its technique options at their defaults: cells that differ only in those share it."""
    job = result.job
    fields = type(job.options).model_fields
    cleared = job.options.model_copy(update={name: fields[name].default for name in WORKFLOWS[job.workflow].techniques})
    return job.model_copy(update={"options": cleared}).cell_settings


def ablations(rows: Iterable[PerfRow]) -> list[Ablation]:
    """Each group of two or more ok cells of a workflow with techniques, differing only in the techniques they ran."""
    groups: dict[tuple, list[Rung]] = defaultdict(list)
    for row in rows:
        info = WORKFLOWS.get(row.workflow)
        if info is None or not info.techniques or row.status != "ok" or row.value is None:
            continue
        ran = techniques_run(row.result)
        if ran is not None:
            key = (row.gpu, row.env, row.model, row.workflow, row.precision, row.batch, _without_techniques(row.result))
            groups[key].append(Rung(row, ran))
    found = []
    for (gpu, env, model, workflow, precision, batch, _), rungs in groups.items():
        if len({rung.techniques for rung in rungs}) < 2:
            continue
        order = WORKFLOWS[workflow].techniques
        rungs.sort(key=lambda rung: (len(rung.techniques), [order.index(t) for t in rung.techniques]))
        found.append(Ablation(f"{model} · {workflow} · {precision} b{batch} · {gpu} · {env}", tuple(rungs)))
    return sorted(found, key=lambda ablation: ablation.title)


def _gain(lower: Rung, upper: Rung) -> str:
    """upper's gain over lower (lower's time / upper's), or why it claims none."""
    why = [reason for reason in (lower.row.no_verdict, upper.row.no_verdict) if reason]
    if "check failed" in why:
        return "check failed: no gain"
    latency_low, latency_up = lower.row.result.metrics.latency, upper.row.result.metrics.latency
    assert latency_low is not None and latency_up is not None  # an ok row with a value has its timing
    ratio, figure = time_ratio(latency_low, latency_up)
    text = ratio_label(ratio) + (" on device time" if figure == "device time" else "")
    return text + (f" ({', '.join(why)}: no verdict)" if why else "")


def _label(rung: Rung) -> str:
    return " ".join(f"+{technique}" for technique in rung.techniques) or "base"


def _step(row: PerfRow) -> str:
    latency = row.result.metrics.latency
    if latency is None or latency.step_median_ms is None:
        return "—"
    bounds = ((latency.step_ci_low_ms, latency.step_ci_high_ms)
              if latency.step_ci_low_ms is not None and latency.step_ci_high_ms is not None else None)
    return fmt.interval(latency.step_median_ms, bounds, 3)


COLUMNS = (Column("variant"), Column("figure [95 % interval]", numeric=True), Column("processes", numeric=True),
           Column("step ms [95 %]", numeric=True), Column("of the decode bound", numeric=True), Column("check"),
           Column("gain over the row above", numeric=True), Column("gain over the base", numeric=True))


def _cells(rung: Rung, above: Optional[Rung], base: Rung) -> tuple[Cell, ...]:
    row = rung.row
    check = "—" if row.correct is None else "passed" if row.correct else "FAILED"
    return (*text_cells(_label(rung), f"{fmt.interval(row.value, row.interval)} {row.unit}", str(row.processes),
                        _step(row), fmt.bounds(row)),
            Cell(check, tone="fail" if row.correct is False else None),
            *text_cells("—" if above is None else _gain(above, rung), "—" if rung is base else _gain(base, rung)))


def ablation_section(found: Iterable[Ablation]) -> Optional[Section]:
    tables = tuple(
        Table(ablation.title, "each technique added in the catalog's order; a gain is the rung's time over the "
              "other's with its 95 % interval (≈ where it holds 1.0); a verdict needs "
              "≥ 3 processes a side and passed checks", COLUMNS,
              tuple(_cells(rung, ablation.rungs[index - 1] if index else None, ablation.rungs[0])
                    for index, rung in enumerate(ablation.rungs)))
        for ablation in found)
    return Section("Techniques, one at a time (ablation)", tables) if tables else None

