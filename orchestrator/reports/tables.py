"""Rich tables of results: one column per field where the terminal is wide enough, else a compact table that stays
readable in 80 columns (the job on one line, its reason under it)."""

from typing import Iterable, Optional

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from mlcbench.orchestrator.reports.data import (deciding_timing, energy_of, implausible, joules_per_unit, not_compiled,
                                                oversubscribed, timed_calls_unchecked, wide)
from mlcbench.orchestrator.reports.fmt import estimate, printable
from mlcbench.orchestrator.reports.statuses import terminal_style
from mlcbench.schema import JobSpec, Result, Timing


def _num(value: Optional[float], digits: int = 2) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _median(latency: Optional[Timing]) -> str:
    """The median time; flagged (⚠) where the 95 % interval of the figure a cell is judged on is wide (reports'
    WIDE_INTERVAL)."""
    if latency is None:
        return ""
    return _num(latency.median_ms, 3) + (" [yellow]⚠[/]" if wide(deciding_timing(latency)[0]) else "")


def _throughput(result: Result) -> str:
    metrics = result.metrics
    return (f"{_num(metrics.tokens_per_s, 1)} tok/s" if metrics.tokens_per_s is not None
            else f"{_num(metrics.tflops, 3)} TF" if metrics.tflops is not None else "")


def _energy(result: Result) -> str:
    """Joules per generated token (LLMs) or per call, with the interval ("" where the cell has no figure)."""
    figure = joules_per_unit(result)
    return "" if figure is None else estimate(*figure)


def _energy_or_why(result: Result) -> str:
    """The energy column's cell: the figure, or why the cell has none."""
    energy = energy_of(result)
    return _energy(result) or (f"none: {energy.reason}" if energy is not None and energy.reason else "")


def _reason(result: Result) -> str:
    """The result's reason, a figure that cannot have been measured, an LLM cell's timed tokens compared with their
    prompt's checked call, and a CPU host that was oversubscribed when its timed calls began or ended."""
    load, impossible, check = oversubscribed(result), implausible(result), result.correctness
    flag = f"⚠ host oversubscribed (load {load:.1f} per CPU)" if load is not None else ""
    compared = ""
    if check is not None and check.timed_tokens is not None:
        compared = (f"{'timed calls not checked: ' if timed_calls_unchecked(result) else ''}"
                    f"{check.timed_tokens_compared} of {check.timed_tokens} timed tokens compared")
    return "; ".join(part for part in (f"⚠ implausible: {impossible}" if impossible else "", flag, compared,
                                       result.reason) if part)


def _where(result: Result) -> str:
    return f"{result.provenance.gpu_tag or '?'} {result.provenance.env or '?'}"


class ResultsTable:
    """Picks the wide or the compact table for the width it is drawn in."""

    def __init__(self, results: Iterable[Result], title: str):
        self.results, self.title = list(results), title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = wide_table(self.results, self.title)
        natural = Measurement.get(console, options.update(max_width=10_000), wide).maximum
        yield wide if natural <= options.max_width else compact_table(self.results, self.title)


def results_table(results: Iterable[Result], title: str = "results") -> ResultsTable:
    return ResultsTable(results, title)


NOT_COMPILED = " (not compiled)"


def _compiled_nothing(result: Result) -> bool:
    """An ok result of a torch.compile workflow that compiled nothing: it ran eager code (as reports say too)."""
    return result.status == "ok" and not_compiled(result)


def _model(job: JobSpec) -> str:
    """The model, and the checkpoint whose weights it ran with (random weights go unsaid)."""
    return f"{job.model} (weights {job.model_path})" if job.model_path else job.model


def _stored(text: str) -> Text:
    """Stored text in a cell: never read as markup, nothing in it acting on the terminal."""
    return Text(printable(text))


def wide_table(results: list[Result], title: str) -> Table:
    table = Table(title=_stored(title), show_lines=False)
    energy = any(_energy(result) for result in results)  # a column only where a cell has a figure (not on a CPU)
    for name, justify in [("gpu", "left"), ("env", "left"), ("model", "left"), ("workflow", "left"),
                          ("prec", "left"), ("batch", "right"), ("status", "left"), ("median ms", "right"),
                          ("TFLOPS / tok/s", "right"), *([("energy", "right")] if energy else []),
                          ("compile s", "right"), ("correct", "left"), ("reason", "left")]:
        table.add_column(name, justify=justify, overflow="fold")
    for result in results:
        metrics, job = result.metrics, result.job
        correct = "" if result.correctness is None else (
            "[red]NO[/]" if not result.correctness.passed else "[yellow]timed calls not checked[/]"
            if timed_calls_unchecked(result) else "yes")
        style = terminal_style(result.status)
        table.add_row(
            _stored(result.provenance.gpu_tag or ""), _stored(result.provenance.env or ""), _stored(_model(job)),
            _stored(job.workflow_label()), job.precision, str(job.batch_size),
            f"[{style}]{result.status}[/]{NOT_COMPILED if _compiled_nothing(result) else ''}",
            _median(metrics.latency), _throughput(result), *([_stored(_energy_or_why(result)[:80])] if energy else []),
            _num(metrics.compile_s), correct, _stored(_reason(result)[:120]),
        )
    return table


def compact_table(results: list[Result], title: str) -> Table:
    """The job and its reason share a column that wraps between words; gpu and env are in the title when they are
    the same for every row."""
    places = {_where(result) for result in results}
    table = Table(title=_stored(title + (f" ({next(iter(places))})" if len(places) == 1 else "")),
                  box=box.SIMPLE_HEAD)
    if len(places) > 1:
        table.add_column("gpu env")
    table.add_column("job", ratio=1)
    table.add_column("status", no_wrap=True)
    table.add_column("speed", justify="right", no_wrap=True)
    table.add_column("compile s", justify="right", no_wrap=True)
    for result in results:
        job, metrics = result.job, result.metrics
        label = _stored(f"{_model(job)} {job.workflow_label()} {job.precision} b{job.batch_size}")
        if _reason(result):
            label.append(f"\n{printable(_reason(result))}", style="dim")
        status = Text(result.status, style=terminal_style(result.status))
        if result.correctness is not None and not result.correctness.passed:
            status.append(" wrong", style="red")
        elif timed_calls_unchecked(result):
            status.append(" timed calls not checked", style="yellow")
        if _compiled_nothing(result):
            status.append(NOT_COMPILED)
        figure = _throughput(result) or (f"{_num(metrics.latency.median_ms, 3)} ms" if metrics.latency else "")
        if _energy(result):
            figure += f"\n{_energy(result)}"
        cells = [label, status, figure, _num(metrics.compile_s)]
        table.add_row(*([_stored(_where(result))] if len(places) > 1 else []), *cells)
    return table


def history_table(results: Iterable[Result], title: str) -> Table:
    """Attempts in the order they were stored, each with when it ended and the sweep that stored it."""
    table = Table(title=_stored(title), box=box.SIMPLE_HEAD)
    for name, justify in [("ended (UTC)", "left"), ("sweep", "left"), ("gpu env", "left"), ("job", "left"),
                          ("status", "left"), ("speed", "right")]:
        table.add_column(name, justify=justify, overflow="fold")
    for result in results:
        job, provenance = result.job, result.provenance
        ended = provenance.ended_at or provenance.started_at
        figure = _throughput(result) or (f"{_num(result.metrics.latency.median_ms, 3)} ms" if result.metrics.latency
                                         else "")
        table.add_row(f"{ended:%Y-%m-%d %H:%M:%S}" if ended else "", _stored(provenance.sweep_id or ""),
                      _stored(_where(result)),
                      _stored(f"{job.model} {job.workflow_label()} {job.precision} b{job.batch_size}"),
                      Text(result.status, style=terminal_style(result.status)), figure)
    return table
