"""Studies: one folder per question the project answers (benchmarks/studies/<name>/), holding the store its answer
comes from, the report generated from that store, and manifest.toml, which says what was asked, what the answer is,
where and how it was measured, and which cell's figure the answer quotes. The figure is recomputed from the store with
the reports' own code (export.flat_row), so an answer cannot drift from its data.

    python tools/studies.py [benchmarks/studies]

checks every study's figure against its store and writes the index, benchmarks/README.md, from the manifests, and
the support matrix, docs/support.md, from the catalog, the envs and the studies' stores."""

import sqlite3
import sys
import tempfile
import tomllib
from contextlib import closing
from datetime import date
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field

from mlcbench.orchestrator.envs import env_names, load_env
from mlcbench.orchestrator.reports.export import FlatRow, flat_row
from mlcbench.orchestrator.store import Store
from mlcbench.schema import WORKFLOWS, Result
from mlcbench.schema.base import StrictModel

MANIFEST = "manifest.toml"
REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "benchmarks" / "studies"
SUPPORT = REPO / "docs" / "support.md"

Quantity = Literal["step_ms", "median_ms", "device_median_ms", "tokens_per_s", "compile_cold_s", "compile_warm_s",
                   "step_bandwidth_fraction", "joules_per_token"]
# the FlatRow fields holding a quantity's 95 % interval, where the store has one
_INTERVALS: dict[str, tuple[str, str]] = {"step_ms": ("step_ci_low_ms", "step_ci_high_ms"),
                                          "median_ms": ("ci_low_ms", "ci_high_ms"),
                                          "device_median_ms": ("device_ci_low_ms", "device_ci_high_ms"),
                                          "joules_per_token": ("joules_per_token_ci_low", "joules_per_token_ci_high")}
_UNITS: dict[str, str] = {"step_ms": " ms", "median_ms": " ms", "device_median_ms": " ms", "tokens_per_s": " tok/s",
                          "compile_cold_s": " s", "compile_warm_s": " s", "step_bandwidth_fraction": "",
                          "joules_per_token": " J/token"}


class Cell(StrictModel):
    """One cell of the store: the coordinates a report shows it under."""

    gpu: str
    model: str
    workflow: str
    precision: str
    batch: int
    # the options set away from their defaults
    options: dict[str, Any] = {}
    env: Optional[str] = None  # where a store holds the cell in several envs: the one quoted


class Figure(StrictModel):
    """The number the answer quotes, as the store gives it, rounded to `digits` decimals."""

    cell: Cell
    quantity: Quantity
    digits: int = Field(ge=0, le=6)
    value: float
    low: Optional[float] = None  # the 95 % interval, for quantities that have one
    high: Optional[float] = None

    def text(self) -> str:
        """How the answer writes it: '0.956 ms [0.915–0.999]'."""
        interval = f" [{self.low:,.{self.digits}f}–{self.high:,.{self.digits}f}]" \
            if self.low is not None and self.high is not None else ""
        return f"{self.value:,.{self.digits}f}{_UNITS[self.quantity]}{interval}"


class Manifest(StrictModel):
    question: str
    answer: str  # one line, quoting the figure with its interval
    gpu: str
    host: str
    versions: dict[str, str]
    date: date
    commit: str
    command: str  # what reproduces the store
    # the correctness check its cells were judged by (a store keeps the verdicts of the check that ran; re-judging
    # under a later one means measuring again)
    check: str
    store: str = "store.db"
    report: str = "report.md"
    figure: Figure


def load(folder: Path) -> Manifest:
    with (folder / MANIFEST).open("rb") as file:
        return Manifest.model_validate(tomllib.load(file))


def studies(root: Path = STUDIES) -> dict[str, Manifest]:
    return {folder.name: load(folder) for folder in sorted(root.iterdir()) if (folder / MANIFEST).is_file()}


def snapshot(store_file: Path, copy: Path) -> None:
    """A copy of a SQLite store as its readers see it: with what its write-ahead log holds, which a copy of the file
    alone would miss while a writer has it open."""
    with closing(sqlite3.connect(f"file:{store_file}?mode=ro", uri=True)) as source, \
            closing(sqlite3.connect(copy)) as target:
        source.backup(target)


def ok_cells(store_file: Path) -> list[Result]:
    """The store's ok cells, read from a copy of it (opening a store upgrades its schema in place)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / store_file.name
        snapshot(store_file, copy)
        store = Store(f"sqlite:///{copy}")
        try:
            return store.cells(status="ok")
        finally:
            store.engine.dispose()


def cell_row(store_file: Path, cell: Cell) -> FlatRow:
    """The cell's exported row."""
    found = [result for result in ok_cells(store_file)
             if (result.provenance.gpu_tag, result.job.model, result.job.workflow, result.job.precision,
                 result.job.batch_size, result.job.options.model_dump(exclude_defaults=True))
             == (cell.gpu, cell.model, cell.workflow, cell.precision, cell.batch, cell.options)
             and cell.env in (None, result.provenance.env)]
    if len(found) != 1:
        raise LookupError(f"{store_file}: {len(found)} ok cells match {cell.model_dump(exclude_defaults=True)}")
    return flat_row(found[0])


def recomputed(folder: Path, manifest: Manifest) -> Figure:
    """The manifest's figure as the store gives it today."""
    figure = manifest.figure
    row = cell_row(folder / manifest.store, figure.cell)

    def rounded(name: str) -> Optional[float]:
        value: Any = getattr(row, name)
        return None if value is None else round(value, figure.digits)

    low, high = _INTERVALS.get(figure.quantity, (None, None))
    value = rounded(figure.quantity)
    if value is None:
        raise LookupError(f"{folder.name}: the cell has no {figure.quantity}")
    return figure.model_copy(update={"value": value, "low": rounded(low) if low else None,
                                     "high": rounded(high) if high else None})


def index(root: Path = STUDIES) -> str:
    """benchmarks/README.md: every study's question, answer and where it was measured."""
    lines = ["# Studies", "",
             "Each folder of `studies/` answers one question: `manifest.toml` (the question, the answer and the figure "
             "it quotes, GPU, host, versions, date, commit, the command that reproduces it), the store the answer "
             "comes from and the report generated from it. `tests/test_studies.py` recomputes each figure from its "
             "store; `make studies` (`python tools/studies.py`) writes this index from the manifests.",
             "", "`suites/` holds the suites the studies ran; the scripts beside them run the studies and the "
             "GPU machine's work, each saying at its top what it does and how to run it: "
             + ", ".join(f"`{script.name}`" for script in sorted([*root.parent.glob("*.py"), *root.parent.glob("*.sh")]))
             + ".", ""]
    for name, manifest in studies(root).items():
        versions = ", ".join(f"{package} {version}" for package, version in manifest.versions.items())
        lines += [f"## [{name}](studies/{name}/)", "", f"**{manifest.question}**", "", manifest.answer, "",
                  f"- measured: {manifest.gpu}, {manifest.host}; {versions}; {manifest.date}, commit {manifest.commit}",
                  f"- reproduce: `{manifest.command}`", f"- judged by: {manifest.check}",
                  f"- store: [`{manifest.store}`](studies/{name}/{manifest.store}), report: "
                  f"[`{manifest.report}`](studies/{name}/{manifest.report})", ""]
    return "\n".join(lines)


def support_matrix(root: Path = STUDIES) -> str:
    """docs/support.md's table: each catalog workflow, what it is, the studies that measured it ok (on which GPUs) and
    the envs that offer it."""
    measured: dict[str, dict[str, set[str]]] = {name: {} for name in WORKFLOWS}
    envs = {name: load_env(name) for name in env_names()}
    in_containers: set[str] = set()  # envs that measured a GPU cell in a container
    for study, manifest in studies(root).items():
        for result in ok_cells(root / study / manifest.store):
            if result.job.workflow in measured:
                measured[result.job.workflow].setdefault(study, set()).add(result.provenance.gpu_tag or "?")
            env = envs.get(result.provenance.env or "")
            if result.job.device == "cuda" and env is not None and env.runtime == "docker":
                in_containers.add(env.name)
    lines = ["| workflow | what | measured in the studies | envs that offer it |", "|---|---|---|---|"]
    for name, info in WORKFLOWS.items():
        offering = [env for env, spec in envs.items() if spec.provides(name)]
        studies_cell = "; ".join(f"[{study}](../benchmarks/studies/{study}/) ({', '.join(sorted(gpus))})"
                                 for study, gpus in sorted(measured[name].items())) or "—"
        lines.append(f"| `{name}` | {info.description} | {studies_cell} | "
                     f"{'all' if len(offering) == len(envs) else ', '.join(offering)} |")
    containers = ", ".join(f"`{name}`" for name in sorted(in_containers)) or "none yet: every GPU cell above ran in " \
        "`local`, the worker in the GPU machine's own interpreter"
    return "\n".join(lines) + f"\n\nEnvs whose container measured a GPU cell in the studies: {containers}.\n"


def support_page(root: Path = STUDIES) -> str:
    return ("# Support matrix\n\nGenerated by `python tools/studies.py` from the catalog "
            "(`schema/catalog.py`), the envs (`envs/*/env.toml`) and the studies' stores; `tests/test_studies.py` "
            "holds it to them. \"Measured\" means an `ok` cell in a committed study; a workflow with none there was "
            "run elsewhere or only written (its adapter is tested with stand-in modules).\n\n" + support_matrix(root))


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else STUDIES
    wrong = []
    for name, manifest in studies(root).items():
        figure = recomputed(root / name, manifest)
        if figure != manifest.figure:
            wrong.append(f"{name}: the manifest says {manifest.figure.text()}, the store gives {figure.text()}")
    (root.parent / "README.md").write_text(index(root), encoding="utf-8")
    SUPPORT.write_text(support_page(root), encoding="utf-8")
    print("\n".join(wrong) or f"every figure recomputes; {root.parent / 'README.md'} and {SUPPORT} written")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
