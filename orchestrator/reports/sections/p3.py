"""P3 scores (performance, productivity, portability, plus input flexibility and architecture support) per workflow,
computed from the stored results. Each score is 1 (worst) to 5 (best); the rubric below is printed with the report."""

from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Iterable, Optional

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import (DEVICE_TIME_BELOW_MS, VERDICT_PROCESSES, PerfRow, hand_written,
                                                workflow_order)
from mlcbench.orchestrator.reports.table import Bullets, Cell, Column, Section, Table, text_cells
from mlcbench.schema import REFERENCE, WORKFLOWS
from mlcbench.schema.results import DecodeLoop

# (minimum median speedup over eager, score), best first
SPEEDUP_STEPS = ((3.0, 5), (2.0, 4), (1.2, 3), (0.9, 2))
# (maximum median compile seconds, score), best first
COMPILE_STEPS = ((10.0, 5), (60.0, 4), (300.0, 3), (1200.0, 2))
# Decode loops other than Hugging Face's generate() mean the user had to write their own generation code.
STOCK_DECODE_LOOP: DecodeLoop = "hf_generate"

RUBRIC: tuple[tuple[str, str], ...] = (
    ("Performance", "median speedup over eager across every (model, batch, precision, env, GPU) where both ran "
                    f"with ≥ {VERDICT_PROCESSES} worker processes and the workflow passed its correctness check: "
                    "≥3× → 5, ≥2× → 4, ≥1.2× → 3, ≥0.9× → 2, else 1 (eager itself is 1.0× → 2). "
                    "Each pairs with eager on the same physical GPU (UUID and host) where eager ran there; the pairs "
                    "that had to cross GPUs are counted beside. "
                    "A speedup whose 95 % interval holds 1.0 counts as 1.0; one from fewer processes, a failed "
                    "check or a run that compiled nothing counts not at all (their number is shown beside). Cells "
                    f"under {DEVICE_TIME_BELOW_MS:g} ms compare device times where both sides have them. Blank when "
                    "no such pair ran."),
    ("Productivity", "median compile cost (JIT: preparation + first call; AOT: build) over the runs that succeeded "
                     "and passed their check: ≤10 s → 5, ≤60 s → 4, ≤300 s → 3, ≤1200 s → 2, else 1; minus 1 (not "
                     "below 1) when the workflow needed code changes, i.e. it ran its own decode loop instead of generate() "
                     "(applied.decode_loop)."),
    ("Portability", "fraction f of the (model, env, GPU) cells the workflow was tried in where at least one run ended "
                    "ok with its check passed: score 1 + round(4f). Only envs where something ran on that GPU count "
                    "(an env that never ran says nothing of the workflow)."),
    ("Input flexibility", "fraction b of the tried batch sizes (per model, env and GPU, in envs that ran) that ran ok "
                          "with their check passed: score "
                          "1 + round(3b), plus 1 when the workflow declares dynamic shapes (applied.dynamic_shapes: a "
                          "dynamic KV cache, or an export with a dynamic batch or sequence axis), so one build serves "
                          "every input length."),
    ("Architecture support", "fraction g of the GPU tags in this report where something ran and the workflow ran "
                             "ok (its check passed) at least once: "
                             "score 1 + round(4g). With one GPU in the store it only says whether it ran there."),
    ("Correctness", "not scored: checks against eager that failed are counted next to the scores, and listed in "
                    "the correctness section."),
    ("Tokens per joule", "not scored: the median over the same pairs as performance of eager's joules per call / the "
                         "workflow's (the GPU's energy counter over the timed calls; more tokens per joule above 1.0), "
                         "counted 1.0 where the interval holds 1.0; pairs where either side has no energy figure are "
                         "left out."),
)


@dataclass(frozen=True)
class P3Row:
    """One workflow with one set of options (each variant compiles its own program: scored apart)."""

    workflow: str
    options: str  # set away from their defaults, in words ("" for none)
    median_speedup: Optional[float]
    speedup_pairs: int
    # speedups measured but not counted: fewer processes than a verdict needs on a side, or not checked
    speedups_without_verdict: int
    # of those counted, pairs whose eager ran on another physical GPU (none ran on the workflow's own)
    speedups_across_gpus: int
    performance: Optional[int]
    median_compile_s: Optional[float]
    custom_decode_loop: bool
    productivity: Optional[int]
    cells_ran: int
    cells_tried: int
    portability: int
    batches_ran: int
    batches_tried: int
    dynamic_shapes: bool
    input_flexibility: int
    gpus_ran: tuple[str, ...]
    gpus_in_report: tuple[str, ...]
    architecture: int
    checks_failed: int
    checks: int
    # eager's joules per call / the workflow's, median over the judged pairs that have both (RUBRIC, "Tokens per joule")
    median_energy_gain: Optional[float] = None
    energy_pairs: int = 0


def _step_score(value: float, steps: tuple[tuple[float, int], ...], higher_is_better: bool) -> int:
    for bound, score in steps:
        if (value >= bound) if higher_is_better else (value <= bound):
            return score
    return 1


def _fraction_score(ran: int, tried: int, span: int) -> int:
    return 1 + round(span * ran / tried) if tried else 1


def _worked(row: PerfRow) -> bool:
    """Ran ok, compiled something and did not fail its check: a wrong answer fast is no result, and eager code run by a
    compiler's workflow says nothing of the compiler."""
    return row.status == "ok" and not row.check_failed and not row.not_compiled


def p3_rows(rows: Iterable[PerfRow]) -> list[P3Row]:
    rows = list(rows)
    # an env that ran nothing on a GPU (no engine, an image that did not build) says nothing of any workflow
    envs_that_ran = {(row.env, row.gpu) for row in rows if row.status == "ok"}
    rows_in_envs_that_ran = [row for row in rows if (row.env, row.gpu) in envs_that_ran]
    gpus_in_report = tuple(sorted({row.gpu for row in rows}))
    gpus_that_ran = {gpu for _, gpu in envs_that_ran}
    by_variant: dict[tuple[str, str], list[PerfRow]] = defaultdict(list)
    for row in rows_in_envs_that_ran:
        by_variant[(row.workflow, row.result.job.options.non_default())].append(row)
    scored = []
    for workflow, options in sorted((variant for variant in by_variant if not hand_written(variant[0])),
                                    key=lambda variant: (workflow_order(variant[0]), variant[1])):
        members = by_variant[(workflow, options)]
        worked = [row for row in members if _worked(row)]
        # eager is its own reference: 1.0, where it can carry a verdict itself
        judged = [row for row in worked if (row.speedup is not None and row.speedup.verdict)
                  or (row.workflow == REFERENCE and row.no_verdict is None)]
        speedups = [row.speedup.claimed if row.speedup else 1.0 for row in judged]
        energy_gains = [_claimed(row.speedup.energy) if row.speedup else 1.0 for row in judged
                        if (row.speedup.energy if row.speedup else row.energy) is not None]
        across = sum(1 for row in judged if row.speedup is not None and row.speedup.across_gpus)
        unjudged = sum(1 for row in worked if row.speedup is not None and not row.speedup.verdict)
        compile_times = [row.result.metrics.compile_s for row in worked if row.result.metrics.compile_s is not None]
        custom_loop = any(row.result.metrics.applied.decode_loop not in (None, STOCK_DECODE_LOOP) for row in worked)
        median_speedup = median(speedups) if speedups else None
        median_compile = median(compile_times) if compile_times else None
        productivity = None
        if median_compile is not None:
            productivity = max(1, _step_score(median_compile, COMPILE_STEPS, higher_is_better=False) - custom_loop)
        cells_tried = {(row.model, row.env, row.gpu) for row in members}
        cells_ran = {(row.model, row.env, row.gpu) for row in worked}
        batches_tried = {(row.model, row.env, row.gpu, row.batch) for row in members}
        batches_ran = {(row.model, row.env, row.gpu, row.batch) for row in worked}
        dynamic = any(row.result.metrics.applied.dynamic_shapes for row in worked)
        gpus_ran = tuple(sorted({row.gpu for row in worked}))
        checks = [row.correct for row in members if row.correct is not None]
        scored.append(P3Row(
            workflow=workflow, options=options, median_speedup=median_speedup, speedup_pairs=len(speedups),
            speedups_without_verdict=unjudged, speedups_across_gpus=across,
            performance=_step_score(median_speedup, SPEEDUP_STEPS, True) if median_speedup is not None else None,
            median_compile_s=median_compile, custom_decode_loop=custom_loop, productivity=productivity,
            cells_ran=len(cells_ran), cells_tried=len(cells_tried),
            portability=_fraction_score(len(cells_ran), len(cells_tried), 4),
            batches_ran=len(batches_ran), batches_tried=len(batches_tried), dynamic_shapes=dynamic,
            input_flexibility=min(5, _fraction_score(len(batches_ran), len(batches_tried), 3) + dynamic),
            gpus_ran=gpus_ran, gpus_in_report=tuple(gpu for gpu in gpus_in_report if gpu in gpus_that_ran),
            architecture=_fraction_score(len(gpus_ran), len(gpus_that_ran), 4),
            checks_failed=sum(1 for passed in checks if not passed), checks=len(checks),
            median_energy_gain=median(energy_gains) if energy_gains else None, energy_pairs=len(energy_gains)))
    return scored


def _claimed(ratio: stats.Ratio) -> float:
    """What a summary may count of a ratio: 1.0 where its interval holds 1.0."""
    return 1.0 if ratio.significant is False else ratio.value


def _speedups(row: P3Row) -> str:
    """'1.45×, n=6 judged, 2 without a verdict': the median speedup and the cells behind it."""
    text = f"{fmt.ratio(row.median_speedup)}, n={row.speedup_pairs} judged"
    text += f" ({row.speedups_across_gpus} against eager on another GPU)" if row.speedups_across_gpus else ""
    return text + (f", {row.speedups_without_verdict} without a verdict" if row.speedups_without_verdict else "")


def _cells(row: P3Row) -> tuple[Cell, ...]:
    return (*text_cells(
        row.workflow + (f" ({row.options})" if row.options else ""), f"{row.performance or '—'} ({_speedups(row)})",
        f"{row.productivity or '—'} ({fmt.number(row.median_compile_s)} s"
        + (", own decode loop" if row.custom_decode_loop else "") + ")",
        f"{row.portability} ({row.cells_ran}/{row.cells_tried} cells)",
        f"{row.input_flexibility} ({row.batches_ran}/{row.batches_tried} batches"
        + (", dynamic shapes" if row.dynamic_shapes else "") + ")",
        f"{row.architecture} ({', '.join(row.gpus_ran) or 'none'} of {', '.join(row.gpus_in_report)})"),
        Cell(f"{row.checks_failed} of {row.checks}", tone="fail" if row.checks_failed else None),
        *text_cells(f"{fmt.ratio(row.median_energy_gain)}, n={row.energy_pairs}" if row.energy_pairs else "—"))


def p3_section(rows: Iterable[P3Row]) -> Optional[Section]:
    rows = list(rows)
    if not rows:
        return None
    return Section("P3 summary", (Table(
        "", "scores 1 (worst) to 5 (best), from the data in this report",
        (Column("workflow"), Column("performance"), Column("productivity"), Column("portability"),
         Column("input flexibility"), Column("architecture support"), Column("failed checks"),
         Column("tokens/J vs eager")),
        tuple(_cells(row) for row in rows)), Bullets("Rubric", tuple(f"{name}: {text}" for name, text in RUBRIC) + (_NOT_SCORED,))))


_NOT_SCORED = ("Not scored: the hand-written reference rows (" + ", ".join(
    name for name, info in WORKFLOWS.items() if info.hand_written) + "), mlcbench's own kernels rather than a "
    "compiler's output")
