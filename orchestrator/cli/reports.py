"""`mlcbench report`, `compare`, `export` and `merge`: reading the result store (and folding stores together)."""

import sys
from pathlib import Path
from typing import Annotated, Optional, get_args

import typer
from mlcbench.orchestrator.cli.console import (DbOption, console, exits_cleanly, split, statuses, store_url,
                                                warn_unreadable, workflows)
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.loading import load_attempts, load_results
from mlcbench.orchestrator.reports.sections.compare import Comparison, compare as compare_rows, compare_stores
from mlcbench.orchestrator.reports.sections.crossgen import comparison_blocks
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.outputs import STDOUT, output_file, output_folder, write_atomically
from mlcbench.orchestrator.reports.export import Format, to_csv, to_json, write_parquet
from mlcbench.orchestrator.store.merge import merge as merge_stores
from mlcbench.orchestrator.reports.terminal import blocks
from mlcbench.orchestrator.store import DEFAULT_DB, Store, safe_url
from mlcbench.orchestrator.store.database import sqlite_file
from mlcbench.schema import Result

GpuOption = Annotated[Optional[list[str]], typer.Option("--gpu", help="only these GPU tags (repeat or comma-separate)")]
EnvOption = Annotated[Optional[list[str]], typer.Option("--env", help="only these envs (repeat or comma-separate)")]
ModelOption = Annotated[Optional[list[str]], typer.Option("--model", help="only these models")]
WorkflowOption = Annotated[Optional[list[str]], typer.Option("--workflow", help="only these workflows")]


def _selected(db: str, selection: Selection) -> tuple[Store, list[Result]]:
    """The results the filters select; an empty list after saying, in one line, why there is nothing to show."""
    store = Store(db, create=False)
    results = load_results(store, selection)
    warn_unreadable(store)
    if not results:
        console.print(f"no stored results match {selection.describe()} in {safe_url(db)}" if store.rows()
                      else f"the store {safe_url(db)} holds no results yet")
    return store, results


def _store_files(*urls: str) -> list[Path]:
    """The files of the SQLite stores a command reads, with their journals: an output may be none of them."""
    files = [path for path in map(sqlite_file, urls) if path is not None]
    return [companion for path in files
            for companion in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))]


def _existing_store(path_or_url: str) -> str:
    url = store_url(path_or_url)
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise UsageError(f"no such store file: {path_or_url}")
    return url


@exits_cleanly
def report(
    db: DbOption = DEFAULT_DB, gpu: GpuOption = None, env: EnvOption = None, model: ModelOption = None,
    workflow: WorkflowOption = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="also write a static HTML report into this folder")]
    = None,
    markdown: Annotated[Optional[Path], typer.Option(
        "--markdown", help="also write Markdown tables (workflow x batch per model) to this file; - for stdout")]
    = None,
) -> None:
    """Tables of the stored results (support, throughput, speedup, compile cost, correctness, P3, provenance)."""
    selection = Selection(gpus=split(gpu, "--gpu"), envs=split(env, "--env"), models=split(model, "--model"),
                          workflows=workflows(workflow))
    reads = _store_files(db)
    if markdown is not None and markdown != STDOUT:
        output_file(markdown, "--markdown", reads)
    if html is not None:
        output_file(output_folder(html, "--html") / "index.html", "--html", reads)
    store, results = _selected(db, selection)
    if not results:
        return
    # Imported here: matplotlib makes every other mlcbench command slower to start.
    from mlcbench.orchestrator.reports.html import write_html
    from mlcbench.orchestrator.reports.markdown import markdown as markdown_text
    from mlcbench.orchestrator.reports.report import build_report
    from mlcbench.orchestrator.reports.terminal import report_renderables

    built = build_report(results, safe_url(db), selection, attempts=load_attempts(store, selection),
                         calibrations=tuple(store.calibrations(selection.gpus or None)))
    if markdown == Path("-"):
        sys.stdout.write(markdown_text(built))
        return
    for renderable in report_renderables(built):
        console.print(renderable)
    if markdown is not None:
        write_atomically(markdown, lambda path: path.write_text(markdown_text(built), encoding="utf-8"))
        console.print(f"Markdown tables written to {markdown}")
    if html is not None:
        console.print(f"HTML report written to {write_html(built, html)}")


@exits_cleanly
def compare(
    db: DbOption = DEFAULT_DB, gpu: GpuOption = None, env: EnvOption = None, model: ModelOption = None,
    workflow: WorkflowOption = None,
    against: Annotated[Optional[str], typer.Option(
        "--against", help="a second store (SQLite file or URL): the same cells in both, e.g. two sweeps")] = None,
) -> None:
    """Two GPUs (--gpu A --gpu B), two envs on one GPU (--env A --env B), or two stores (--db A --against B): both
    figures and their ratio B / A with its 95 % interval; ≈ where the interval holds 1.0."""
    gpus, envs = split(gpu, "--gpu"), split(env, "--env")
    if against is not None:
        if _same_store(db, store_url(against)):
            raise UsageError(f"--against {against} is the --db store itself; name another store to compare with")
        _compare_stores(db, _existing_store(against),
                        Selection(gpus=gpus, envs=envs, models=split(model, "--model"),
                                  workflows=workflows(workflow)))
        return
    if len(gpus) == 2:
        axis, (first, second) = "gpu", gpus
    elif len(envs) == 2 and len(gpus) <= 1:
        axis, (first, second) = "env", envs
    else:
        raise UsageError("compare needs exactly two --gpu values, or two --env values and at most one --gpu")
    if first == second:
        raise UsageError(f"--{axis} {first} --{axis} {second}: the same {axis} twice would compare its results with "
                         f"themselves; name two different ones")
    selection = Selection(gpus=gpus, envs=envs, models=split(model, "--model"),
                          workflows=workflows(workflow))
    _, results = _selected(db, selection)
    if not results:
        return
    comparison = compare_rows(perf_rows(results), axis, first, second)  # type: ignore[arg-type]
    _print_comparison(comparison)


def _same_store(first: str, second: str) -> bool:
    first_file, second_file = sqlite_file(first), sqlite_file(second)
    if first_file is not None and second_file is not None:
        return first_file.resolve() == second_file.resolve()
    return first == second


def _compare_stores(first: str, second: str, selection: Selection) -> None:
    _, first_results = _selected(first, selection)
    _, second_results = _selected(second, selection)
    if not first_results or not second_results:
        return
    comparison = compare_stores(perf_rows(first_results), perf_rows(second_results), _store_name(first),
                                _store_name(second))
    _print_comparison(comparison)


def _store_name(url: str) -> str:
    """A SQLite store by its file name (column headers), any other by its URL without the password."""
    path = sqlite_file(url)
    return path.stem if path is not None else safe_url(url)


def _print_comparison(comparison: Comparison) -> None:
    for renderable in blocks(comparison_blocks(comparison)):
        console.print(renderable)


@exits_cleanly
def export(
    output_format: Annotated[str, typer.Option("--format", help="csv, json (flat rows + the full Result) or parquet")] = "csv",
    out: Annotated[Optional[Path], typer.Option("--out", help="file to write; stdout when omitted or - (not "
                                                              "parquet)")] = None,
    db: DbOption = DEFAULT_DB, gpu: GpuOption = None, env: EnvOption = None, model: ModelOption = None,
    workflow: WorkflowOption = None,
    status: Annotated[Optional[list[str]], typer.Option("--status", help="only these statuses")] = None,
) -> None:
    """One flat row per stored result: figures, correctness and provenance."""
    if output_format not in get_args(Format):
        raise UsageError(f"unknown --format {output_format!r}; use csv, json or parquet")
    if out == STDOUT:
        out = None
    if output_format == "parquet" and out is None:
        raise UsageError("--format parquet needs --out FILE")
    if out is not None:
        output_file(out, "--out", _store_files(db))
    selection = Selection(gpus=split(gpu, "--gpu"), envs=split(env, "--env"), models=split(model, "--model"),
                          workflows=workflows(workflow), statuses=statuses(status))
    _, results = _selected(db, selection)
    if not results:
        return
    if output_format == "parquet":
        write_atomically(out, lambda path: write_parquet(results, path))  # type: ignore[arg-type]
    else:
        text = to_csv(results) if output_format == "csv" else to_json(results)
        if out is None:
            sys.stdout.write(text)
            return
        write_atomically(out, lambda path: path.write_text(text, encoding="utf-8"))
    console.print(f"{len(results)} row(s) written to {out}")


@exits_cleanly
def merge(
    into: Annotated[str, typer.Option("--into", help="target store (SQLite file or URL); created if missing")],
    sources: Annotated[Optional[list[str]], typer.Argument(
        help="stores to fold in: SQLite files or SQLAlchemy URLs (none: only bring the target to this schema)")]
    = None,
) -> None:
    """Fold result stores together: every attempt joins the target's history (in one transaction), and each cell's
    result follows the usual rule (its latest ok attempt, else its latest final one, else its latest)."""
    target_url = store_url(into)
    source_urls = [_existing_store(source) for source in sources or []]
    source_stores = [Store(url, create=False) for url in source_urls]
    counts = merge_stores(source_stores, Store(target_url))
    for store in source_stores:
        warn_unreadable(store)
    console.print(f"merged {len(source_urls)} store(s) into {safe_url(target_url)}: {counts.describe()}")


def register(app: typer.Typer) -> None:
    for command in (report, compare, export, merge):
        app.command()(command)
