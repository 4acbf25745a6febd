"""Support: per model, each workflow (rows) in each env on each GPU (columns), by the statuses its runs ended with;
and each reason a run did not end ok, once per workflow and env, with the models it applies to."""

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional

from mlcbench.orchestrator.reports.data import env_of, gpu_of, workflow_order
from mlcbench.orchestrator.reports.statuses import SEVERITY
from mlcbench.orchestrator.reports.table import Cell, Column, Section, Table, text_cells
from mlcbench.schema import Result


@dataclass(frozen=True)
class NotOk:
    """A run of a support cell that did not end ok."""

    batch: int
    precision: str
    status: str
    reason: str

    @property
    def outcome(self) -> str:
        return f"{self.status}: {self.reason}"

    def __str__(self) -> str:
        return f"b{self.batch} {self.precision} {self.outcome}"


@dataclass(frozen=True)
class SupportCell:
    status: str  # the most serious status among the cell's runs
    counts: tuple[tuple[str, int], ...]  # (status, runs), most serious first
    not_ok: tuple[NotOk, ...]  # every run that did not end ok, by batch size

    @property
    def reasons(self) -> tuple[str, ...]:
        """'b64 fp16 oom: CUDA out of memory ...' for every run that is not ok."""
        return tuple(str(run) for run in self.not_ok)

    @property
    def label(self) -> str:
        if self.counts == (("ok", self.total),):
            return "ok"
        return " · ".join(f"{status} {count}/{self.total}" for status, count in self.counts)

    @property
    def total(self) -> int:
        return sum(count for _, count in self.counts)


@dataclass(frozen=True)
class SupportMatrix:
    """Workflow (rows) x env on GPU (columns) for one model."""

    model: str
    columns: tuple[tuple[str, str], ...]  # (env, gpu)
    workflows: tuple[str, ...]
    cells: dict[tuple[str, str, str], SupportCell]  # (workflow, env, gpu) -> cell

    def cell(self, workflow: str, env: str, gpu: str) -> Optional[SupportCell]:
        return self.cells.get((workflow, env, gpu))


def support_matrices(results: Iterable[Result]) -> list[SupportMatrix]:
    runs: dict[str, dict[tuple[str, str, str], list[Result]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        runs[result.job.model][(result.job.workflow, env_of(result), gpu_of(result))].append(result)
    matrices = []
    for model in sorted(runs):
        cells = {}
        for key, members in runs[model].items():
            counts = {s: sum(1 for r in members if r.status == s) for s in SEVERITY}
            present = tuple((s, n) for s, n in counts.items() if n)
            not_ok = tuple(NotOk(r.job.batch_size, r.job.precision, r.status, r.reason or "no reason recorded")
                           for r in sorted(members, key=lambda r: r.job.batch_size) if r.status != "ok")
            cells[key] = SupportCell(present[0][0], present, not_ok)
        matrices.append(SupportMatrix(
            model=model, columns=tuple(sorted({(env, gpu) for _, env, gpu in cells})),
            workflows=tuple(sorted({workflow for workflow, _, _ in cells}, key=workflow_order)), cells=cells))
    return matrices


def _matrix_cell(cell: Optional[SupportCell]) -> Cell:
    if cell is None:
        return Cell("not run")
    return Cell(cell.label, tone=cell.status, tooltip="\n".join(cell.reasons) or None, footnotes=cell.reasons)


def support_table(matrix: SupportMatrix) -> Table:
    return Table(f"{matrix.model}: support matrix", "the runs of each workflow by status, most serious first",
                 (Column("workflow"), *(Column(f"{env} @ {gpu}") for env, gpu in matrix.columns)),
                 tuple((Cell(workflow), *(_matrix_cell(matrix.cell(workflow, env, gpu)) for env, gpu in matrix.columns))
                       for workflow in matrix.workflows))


def not_ok_table(matrices: Iterable[SupportMatrix]) -> Optional[Table]:
    """Each distinct reason once per workflow, with the models it applies to."""
    reasons: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for matrix in matrices:
        for (workflow, env, gpu), cell in matrix.cells.items():
            for run in cell.not_ok:
                reasons[(workflow, f"{env} on {gpu}", run.outcome)].add(matrix.model)
    if not reasons:
        return None
    return Table("What did not run, and why", "each reason once per workflow and env, with the models it applies to",
                 (Column("workflow"), Column("env"), Column("status: reason"), Column("models")),
                 tuple(text_cells(workflow, where, outcome, ", ".join(sorted(models)))
                       for (workflow, where, outcome), models in sorted(reasons.items())))


def support_section(matrices: Iterable[SupportMatrix]) -> Optional[Section]:
    matrices = list(matrices)
    if not matrices:
        return None
    not_ok = not_ok_table(matrices)
    return Section("Support matrix", (*(support_table(matrix) for matrix in matrices), *([not_ok] if not_ok else [])))
