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
from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.export import FlatRow, flat_row
from mlcbench.orchestrator.reports.sections.throughput import fastest
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep.sharing import busy_s, processes_of
from mlcbench.schema import FINAL_STATUSES, WORKFLOWS, Result
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
    # a sweep's own cost: its plan on an empty store before it ran, and what its GPUs were busy (per GPU, the union of
    # its processes' lifetimes, summed over GPUs), both in seconds
    plan_estimate_s: Optional[float] = None
    measured_gpu_s: Optional[float] = None


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
    return [result for result in all_cells(store_file) if result.status == "ok"]


def all_cells(store_file: Path) -> list[Result]:
    """The store's cells, read from a copy of it (opening a store upgrades its schema in place)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / store_file.name
        snapshot(store_file, copy)
        store = Store(f"sqlite:///{copy}")
        try:
            return store.cells()
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


# the study whose table opens the README, between these two lines of it
ANSWER_STUDY = "paper-h100"
ANSWER_BEGIN = "<!-- the study's answer: written by tools/studies.py from the {} study's store -->"
ANSWER_END = "<!-- end of the study's answer -->"


def answer_table(store_file: Path) -> str:
    """For each model and batch of the store: the fastest workflow (judged as the reports judge it), its speedup over
    eager with its interval, its cold compile, its energy with its interval and its check."""
    results = all_cells(store_file)
    rows = perf_rows(results)
    lines = ["| model | batch | fastest | speedup over eager | cold compile | energy | check |",
             "|---|---:|---|---|---:|---|---|"]
    for (kind, model, batch), members in sorted(_by_model_and_batch(rows).items(), key=lambda item: (
            item[0][0] != "llm", item[0][1], item[0][2])):
        verdict = fastest(batch, members)
        row = next((member for member in members if member.workflow == verdict.workflow), None)
        if row is None:
            lines.append(f"| {model} | {batch} | {verdict.text.removeprefix(f'b{batch}: ')} | | | | |")
            continue
        flat = flat_row(row.result)
        speedup = f"{row.speedup.label()}" if row.speedup is not None else "—"
        cold = f"{flat.compile_cold_s:.0f} s" if flat.compile_cold_s is not None else "—"
        lines.append(f"| {model} | {batch} | {row.workflow} | {speedup} | {cold} | {_energy(flat)} | "
                     f"{'passed' if row.correct else 'failed' if row.correct is False else 'eager itself'} |")
    finished = sum(result.status in FINAL_STATUSES for result in results)
    return "\n".join(lines) + f"\n\n{finished} of the store's {len(results)} cells final; GPU, versions, date and " \
        f"commit in [its manifest](benchmarks/studies/{store_file.parent.name}/manifest.toml).\n"


def _by_model_and_batch(rows: list) -> dict[tuple[str, str, int], list]:
    grouped: dict[tuple[str, str, int], list] = {}
    for row in rows:
        grouped.setdefault((row.kind, row.model, row.batch), []).append(row)
    return grouped


def _energy(flat: FlatRow) -> str:
    if flat.joules_per_token is not None:
        return (f"{flat.joules_per_token:.3g} J/token [{flat.joules_per_token_ci_low:.3g}–"
                f"{flat.joules_per_token_ci_high:.3g}]" if flat.joules_per_token_ci_low is not None
                else f"{flat.joules_per_token:.3g} J/token")
    if flat.joules_per_call is not None:
        return (f"{flat.joules_per_call:.3g} J/call [{flat.joules_per_call_ci_low:.3g}–"
                f"{flat.joules_per_call_ci_high:.3g}]" if flat.joules_per_call_ci_low is not None
                else f"{flat.joules_per_call:.3g} J/call")
    return f"none: {flat.energy_reason}" if flat.energy_reason else "—"


def readme_with_answer(readme: str, root: Path = STUDIES) -> str:
    """The README with its answer block written afresh from the study's store (unchanged where it has no block)."""
    begin = ANSWER_BEGIN.format(ANSWER_STUDY)
    if begin not in readme or not (root / ANSWER_STUDY).is_dir():
        return readme
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(ANSWER_END, 1)
    table = answer_table(root / ANSWER_STUDY / load(root / ANSWER_STUDY).store)
    return f"{head}{begin}\n{table}{ANSWER_END}{tail}"


def measured_gpu_s(store_file: Path) -> float:
    """The seconds the store's GPUs were busy with its processes: per GPU the union of their lifetimes, summed."""
    return round(sum(busy_s(processes_of(all_cells(store_file))).values()), 1)


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
    readme = REPO / "README.md"
    readme.write_text(readme_with_answer(readme.read_text(encoding="utf-8"), root), encoding="utf-8")
    print("\n".join(wrong) or f"every figure recomputes; {root.parent / 'README.md'} and {SUPPORT} written")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
