"""Correctness checks against eager that failed: every one is listed, with how it was checked and where it failed; and
how many of each LLM cell's timed tokens were compared with their prompt's checked call."""

from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.data import CellKey, timed_calls_unchecked, workflow_order
from mlcbench.orchestrator.reports.table import Column, Paragraph, Section, Table, text_cells
from mlcbench.schema import Correctness, Result
from mlcbench.schema.results import TIMED_TOKENS_CHECKED


@dataclass(frozen=True)
class CheckRow(CellKey):
    """A correctness check against eager (shown for every checked result; failures are never dropped)."""

    passed: bool
    cosine: Optional[float]
    rel_l2_error: Optional[float]
    max_abs_diff: Optional[float]
    token_agreement: Optional[float]
    tolerance: float
    check: Optional[Correctness] = None

    @property
    def where(self) -> str:
        """How it was checked and where it failed: 'teacher_forced, row 3, worst at step 3 of 32 checked, 2 tokens
        beyond noise (margin up to 4.2x the noise), 2 calls a process, 1 of 5 processes failed' (what the result
        recorded)."""
        check = self.check
        if check is None:
            return "—"
        parts = [check.method or "method not recorded"]
        if check.worst_row is not None:
            parts.append(f"row {check.worst_row}")
        if check.worst_step is not None:
            parts.append(f"worst at step {check.worst_step}"
                         + (f" of {check.steps_checked} checked" if check.steps_checked is not None else ""))
        elif check.steps_checked is not None:
            parts.append(f"{check.steps_checked} steps checked")
        if check.tokens_beyond_noise:
            parts.append(f"{check.tokens_beyond_noise} token(s) beyond noise (margin up to "
                         f"{check.worst_token_margin:.1f}x the noise)")
        if check.calls_checked is not None:
            parts.append(f"{check.calls_checked} calls a process")
        if check.timed_calls_failed:
            parts.append(f"{check.timed_calls_failed} of {check.timed_calls_checked} timed calls differed from the "
                         f"checked one")
        if check.timed_tokens is not None:
            parts.append(f"{check.timed_tokens_compared} of {check.timed_tokens} timed tokens compared")
        if check.identical_to_reference:
            parts.append("bit-identical to eager's output")
        if check.processes_checked is not None:
            parts.append(f"{check.processes_failed or 0} of {check.processes_checked} processes failed")
        return ", ".join(parts) + (f" ({check.note})" if check.note else "")


def failed_checks(results: Iterable[Result]) -> list[CheckRow]:
    rows = []
    for result in results:
        check = result.correctness
        if check is None or check.passed:
            continue
        rows.append(CheckRow(**vars(CellKey.of(result)), passed=check.passed, cosine=check.cosine,
                             rel_l2_error=check.rel_l2_error, max_abs_diff=check.max_abs_diff,
                             token_agreement=check.token_agreement, tolerance=check.tolerance, check=check))
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.batch))


COLUMNS = (Column("model"), Column("workflow"), Column("gpu"), Column("env"), Column("precision"),
           Column("batch", numeric=True), Column("cosine", numeric=True), Column("rel. L2 error", numeric=True),
           Column("max abs diff", numeric=True), Column("token agreement", numeric=True),
           Column("tolerance", numeric=True), Column("checked how, failed where"))


@dataclass(frozen=True)
class TimedTokensRow(CellKey):
    """An LLM cell's timed tokens, over its processes, and how many were compared with their prompt's checked call."""

    compared: int
    generated: int
    not_checked: bool


def timed_tokens_rows(results: Iterable[Result]) -> list[TimedTokensRow]:
    rows = [TimedTokensRow(**vars(CellKey.of(result)), compared=result.correctness.timed_tokens_compared,
                           generated=result.correctness.timed_tokens, not_checked=timed_calls_unchecked(result))
            for result in results if result.correctness is not None and result.correctness.timed_tokens is not None
            and result.correctness.timed_tokens_compared is not None]
    return sorted(rows, key=lambda r: (r.model, r.gpu, r.env, workflow_order(r.workflow), r.batch))


TIMED_COLUMNS = (Column("model"), Column("workflow"), Column("gpu"), Column("env"), Column("precision"),
                 Column("batch", numeric=True), Column("timed tokens compared", numeric=True),
                 Column("of", numeric=True), Column("timed calls"))


def _timed_tokens_table(rows: list[TimedTokensRow]) -> Table:
    return Table("", "LLM cells: their timed calls' tokens compared with their prompt's checked call", TIMED_COLUMNS,
                 tuple(text_cells(r.model, r.workflow, r.gpu, r.env, r.precision, str(r.batch), str(r.compared),
                                  str(r.generated), "not checked" if r.not_checked else "checked") for r in rows))


def checks_section(rows: Iterable[CheckRow], timed: Iterable[TimedTokensRow] = ()) -> Section:
    """Shown when no check failed too: that none did is a finding."""
    rows, timed = list(rows), list(timed)
    timed_parts = (_timed_tokens_table(timed), Paragraph(
        f"Each timed call's tokens are compared with the checked call that ran free on the same prompt, in each row "
        f"up to where the two part within that call's own noise; a cell whose timed calls compared under "
        f"{TIMED_TOKENS_CHECKED:.0%} of their tokens says \"timed calls not checked\" and gets no verdict.")) \
        if timed else ()
    if not rows:
        return Section("Correctness checks that failed", (Paragraph("No stored correctness check failed."),
                                                          *timed_parts))
    table = Table("", f"{len(rows)} result(s) differ from eager beyond tolerance", COLUMNS, tuple(text_cells(
        c.model, c.workflow, c.gpu, c.env, c.precision, str(c.batch), fmt.number(c.cosine, 5),
        fmt.number(c.rel_l2_error, 4), fmt.number(c.max_abs_diff, 4), fmt.percent(c.token_agreement),
        fmt.number(c.tolerance, 3), c.where) for c in rows))
    return Section("Correctness checks that failed", (table, Paragraph(
        "✗: the correctness check against eager failed for that result: it gets no speedup, no P3 score and no "
        "verdict."), *timed_parts))
