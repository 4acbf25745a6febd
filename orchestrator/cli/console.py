"""Terminal output shared by the CLI commands: one error line on stderr, tables and progress on stdout."""

import functools
import sys
from typing import Callable, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.reports.tables import STATUS_STYLE
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Result

console = Console()
if not console.is_terminal:  # logs and CI: rich would wrap tables at 80 columns
    console = Console(width=200)
F = TypeVar("F", bound=Callable)


def exits_cleanly(command: F) -> F:
    """A UsageError becomes 'error: ...' on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def warn_unreadable(store: Store) -> None:
    """Rows whose stored result cannot be read were skipped: say which, once, on stderr."""
    if store.unreadable:
        ids = ", ".join(str(row_id) for row_id in sorted(store.unreadable))
        first = next(iter(store.unreadable.values()))
        print(f"warning: skipped {len(store.unreadable)} unreadable row(s) of {store.safe_url} (id {ids}): {first}",
              file=sys.stderr)


class ProgressListener:
    def __init__(self) -> None:
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=console, transient=False)
        self._task = None

    def __enter__(self) -> "ProgressListener":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def planned(self, to_run: int, skipped: int) -> None:
        if to_run:
            self._task = self._progress.add_task("jobs", total=to_run)

    def job_done(self, result: Result) -> None:
        style = STATUS_STYLE.get(result.status, "")
        self._progress.console.print(f"  [{style}]{result.status:<11}[/] {result.job.label()}"
                                     + (f"  [dim]{result.reason}[/]" if result.reason and result.status != "ok" else ""),
                                     highlight=False)
        if self._task is not None:
            self._progress.advance(self._task)
