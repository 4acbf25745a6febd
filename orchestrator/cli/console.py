"""Terminal output shared by the CLI commands: one error line on stderr, tables and progress on stdout."""

import functools
import os
import sys
import time
from typing import Annotated, Callable, Optional, TypeVar, get_args

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.engine import URL

from mlcbench.orchestrator.errors import EnvironmentFailure, ExitCode, UsageError
from mlcbench.orchestrator.planner import measured_in_full, stored_processes
from mlcbench.orchestrator.reports.fmt import printable
from mlcbench.orchestrator.reports.statuses import terminal_style
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.redaction import forget, mask_remembered
from mlcbench.orchestrator.suites import check_workflow_option
from mlcbench.schema import JobSpec, Result, Status

console = Console()
if not console.is_terminal and "COLUMNS" not in os.environ:  # logs and CI: rich would wrap tables at 80 columns
    console = Console(width=200)
F = TypeVar("F", bound=Callable)


def store_url(path_or_url: str) -> str:
    """A store given as a SQLAlchemy URL, or as the path of a SQLite file (as --against and merge take it), taken
    literally: a '?' or '%' in it is part of the file's name, not a URL's query or escape."""
    if "://" in path_or_url or not path_or_url:
        return path_or_url
    return URL.create("sqlite", database=path_or_url).render_as_string(hide_password=False)


DbOption = Annotated[str, typer.Option("--db", callback=store_url,
                                       help="the result store: a SQLite file's path or any SQLAlchemy URL")]


def exits_cleanly(command: F) -> F:
    """A UsageError becomes 'error: ...' on stderr and exit code 2; a failure of the machine (EnvironmentFailure, a
    file that cannot be written) the same with exit code 1; Ctrl-C 'interrupted' and exit code 130."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        forget()
        try:
            return command(*args, **kwargs)
        except UsageError as error:
            print(f"error: {mask_remembered(str(error))}", file=sys.stderr)
            raise typer.Exit(ExitCode.USAGE) from None
        except EnvironmentFailure as error:
            print(f"error: {mask_remembered(str(error))}", file=sys.stderr)
            raise typer.Exit(ExitCode.ENVIRONMENT) from None
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except OSError as error:
            where = f": {error.filename}" if error.filename else ""
            print(f"error: {error.strerror or error}{where}; free space or choose another place, then run the same "
                  f"command again", file=sys.stderr)
            raise typer.Exit(ExitCode.ENVIRONMENT) from None

    return wrapper  # type: ignore[return-value]


def split(values: Optional[list[str]], option: str) -> tuple[str, ...]:
    """Repeated options and comma-separated lists alike (--env a,b --env c); an option given with nothing in it
    (--workflow '') is a mistake, not 'everything'."""
    parts = tuple(part.strip() for value in values or [] for part in value.split(","))
    if any(not part for part in parts):
        raise UsageError(f"{option} {','.join(values or [])!r} has an empty name; name the values, or leave "
                         f"{option} out for all of them")
    return parts


def statuses(values: Optional[list[str]]) -> tuple[str, ...]:
    """--status values (repeated or comma-separated), each one a status a result can have."""
    given = split(values, "--status")
    known = get_args(Status)
    unknown = [value for value in given if value not in known]
    if unknown:
        raise UsageError(f"--status {', '.join(map(repr, unknown))}: not a status; known: {', '.join(known)}")
    return given


def workflows(values: Optional[list[str]]) -> tuple[str, ...]:
    """--workflow values (repeated or comma-separated) of a read command, each checked as the sweep checks its own:
    a typo is a UsageError naming the known workflows, not "no stored results match"."""
    given = split(values, "--workflow")
    check_workflow_option(given)
    return given


def warn_unreadable(store: Store) -> None:
    """Rows whose stored result cannot be read were skipped, or a read-only store's log could not be read: say which,
    once, on stderr."""
    if store.warning:
        print(f"warning: {mask_remembered(store.warning)}", file=sys.stderr)
    if store.unreadable:
        ids = ", ".join(str(row_id) for row_id in sorted(store.unreadable))
        first = next(iter(store.unreadable.values()))
        print(f"warning: skipped {len(store.unreadable)} unreadable row(s) of {store.safe_url} (id {ids}): {first}",
              file=sys.stderr)


class ProgressListener:
    """A bar with the jobs in flight, elapsed time and an estimate of the time left; a line per finished job, which
    also says how far the sweep is and when it should end (a log or a pipe sees no bar)."""

    def __init__(self) -> None:
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("eta"), TextColumn("{task.fields[eta]}"),
                                  console=console, transient=False)
        self._task = None
        self._in_flight: list[str] = []
        self._round = 1
        self._shown: set[str] = set()  # cells with a line already
        self._eta = WorkClock()

    def __enter__(self) -> "ProgressListener":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def planned(self, to_run: int, skipped: int) -> None:
        """to_run: worker processes (each cell's minimum) plus the results stored without one."""
        if to_run:
            self._task = self._progress.add_task("jobs", total=to_run, eta="")

    def round_started(self, index: int, cells: int) -> None:
        self._round = index + 1

    def work_planned(self, seconds: float, lanes: int) -> None:
        self._eta.planned(seconds, lanes)

    def work_done(self, seconds: float) -> None:
        self._eta.done(seconds)
        if self._task is not None:
            self._progress.update(self._task, eta=self._eta.remaining())

    def job_started(self, job: JobSpec) -> None:
        self._in_flight.append(job.label())
        self._describe()

    def process_done(self, result: Result) -> None:
        if result.job.label() in self._in_flight:
            self._in_flight.remove(result.job.label())
        if self._task is not None:
            self._progress.advance(self._task)
        self._describe()

    def due_changed(self, processes: int) -> None:
        if self._task is not None and processes:
            task = self._progress.tasks[self._task]
            self._progress.update(self._task, total=max(task.completed, (task.total or 0) + processes))

    def job_done(self, result: Result) -> None:
        """A cell's attempt stored: a line when it first is (after its first process) and when it has all its
        processes."""
        latency = result.metrics.latency
        processes = len(stored_processes(result)) if latency is not None else 0
        complete = measured_in_full(result)
        if not complete and result.job_id in self._shown:
            return
        self._shown.add(result.job_id)
        count = f"  [dim]{processes} process{'es' if processes != 1 else ''}[/]" if processes else ""
        style = terminal_style(result.status)
        where = ""
        if self._task is not None:
            task = self._progress.tasks[self._task]
            where = f"  [dim]({task.completed:g}/{task.total:g} processes, eta {self._eta.remaining()})[/]"
        reason = f"  [dim]{escape(printable(result.reason))}[/]" if result.reason and result.status != "ok" else ""
        self._progress.console.print(f"  [{style}]{result.status:<11}[/] {escape(printable(result.job.label()))}{count}"
                                     + reason + where, highlight=False)

    def stopping(self) -> None:
        """The first Ctrl-C: said at once, the jobs in flight still end and are stored."""
        print(f"stopping after the job(s) in flight ({', '.join(self._in_flight) or 'none'}); Ctrl-C again stops at "
              f"once", file=sys.stderr, flush=True)

    def _describe(self) -> None:
        if self._task is not None:
            self._progress.update(self._task, description=escape(f"round {self._round}: "
                                                                 + (", ".join(self._in_flight) or "jobs")))


class WorkClock:
    """When the sweep should end: the estimated seconds of work left, at the rate estimated work has been getting
    done (which counts the lanes working at once and how far off the estimates run), or over the lanes before any
    process has ended."""

    def __init__(self) -> None:
        self._planned = self._done = 0.0
        self._lanes = 1
        self._started = time.monotonic()

    def planned(self, seconds: float, lanes: int) -> None:
        self._planned += seconds
        self._lanes = max(lanes, 1)

    def done(self, seconds: float) -> None:
        self._done += seconds

    def remaining_s(self) -> float:
        left = max(self._planned - self._done, 0.0)
        elapsed = time.monotonic() - self._started
        rate = self._done / elapsed if self._done and elapsed > 0 else self._lanes
        return left / rate

    def remaining(self) -> str:
        if not self._planned:
            return "?"
        return format_duration(self.remaining_s())


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
