"""Matplotlib figures of a report, written as PNG files (Agg backend: no display needed)."""

import hashlib
import re
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import FixedLocator, LogFormatter, NullLocator, ScalarFormatter  # noqa: E402

from mlcbench.orchestrator.fractions import peak_tflops  # noqa: E402
from mlcbench.orchestrator.reports.data import PerfRow, workflow_order  # noqa: E402
from mlcbench.orchestrator.reports.report import Report  # noqa: E402
from mlcbench.orchestrator.reports.sections.compare import Comparison  # noqa: E402
from mlcbench.orchestrator.reports.sections.crossgen import GenerationRow, generation_rows  # noqa: E402


@dataclass(frozen=True)
class Figure:
    section: str  # "llm", "synthetic" or "compare"
    title: str
    filename: str


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class _FileNames:
    """A figure's file name from the names it draws, as their slugs; where those say too little, the names' hash too:
    a name with no ASCII letter or digit, or one whose slug another figure of the report took already (names that
    differ only in case or punctuation, Tiny.A and tiny_a): two figures never share a file."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, prefix: str, *names: str) -> str:
        stem = "-".join([prefix, *(_slug(name) for name in names)])
        if stem in self.taken or not all(map(_slug, names)):
            stem += "-" + hashlib.sha256("\0".join(names).encode()).hexdigest()[:10]
        self.taken.add(stem)
        return f"{stem}.png"


def _batch_axis(axes, batches: list[int]) -> None:
    axes.set_xscale("log", base=2)
    axes.xaxis.set_major_locator(FixedLocator(batches))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.xaxis.set_major_formatter(ScalarFormatter())
    axes.set_xlabel("batch size")
    axes.grid(True, which="major", alpha=0.3)


def _series(rows: list[PerfRow]) -> dict[str, list[PerfRow]]:
    """One line per cell group: workflow, env, precision and settings (lengths, options, weights, repetition), ok
    points only, by batch, so that no line joins cells that are not the same. Its label names what tells it from the
    figure's other lines, and says what the tables say of its points: "(not compiled)", or why they carry no verdict
    (n=1, ...)."""
    lines: dict[tuple, list[PerfRow]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (workflow_order(r.workflow), r.env, r.precision, r.settings, r.batch)):
        if row.value is not None:
            lines[(row.workflow, row.env, row.precision, row.settings)].append(row)
    aspects = {name: len({aspect(points[0]) for points in lines.values()}) > 1 for name, aspect in _ASPECTS.items()}
    labels = {key: " ".join([key[0], *(part for name, aspect in _ASPECTS.items()
                                        if aspects[name] and (part := aspect(points[0])))])
              for key, points in lines.items()}
    if len(set(labels.values())) < len(labels):  # settings the aspects do not name (warm-up, repeats, seed...)
        labels = {key: f"{label} cell {key[3]}" for key, label in labels.items()}
    return {labels[key] + _caveat(points): points for key, points in lines.items()}


# what may tell one line of a figure from another besides its workflow, each as its label shows it
_ASPECTS = {
    "env": lambda row: f"env {row.env}",
    "precision": lambda row: row.precision,
    "lengths": lambda row: (f"{row.result.job.input_len}/{row.result.job.output_len} in/out" if row.kind == "llm"
                            else ""),
    "options": lambda row: f"[{row.result.job.options.non_default()}]" if row.result.job.options.non_default() else "",
    "weights": lambda row: f"weights {row.result.job.model_path}" if row.result.job.model_path else "random weights",
}


def _caveat(points: list[PerfRow]) -> str:
    if any(point.not_compiled for point in points):
        return " (not compiled)"
    reasons = sorted({point.no_verdict for point in points if point.no_verdict})
    return f" ({', '.join(reasons)}: no verdict)" if reasons else ""


def _error_bars(axes, points: list[PerfRow], color: str) -> None:
    """Each point's 95 % interval (points without one, from a single process, get none)."""
    if points:
        axes.errorbar([p.batch for p in points], [p.value for p in points], fmt="none", ecolor=color, capsize=3,
                      yerr=[[p.value - p.interval[0] for p in points],  # type: ignore[operator,index]
                            [p.interval[1] - p.value for p in points]])  # type: ignore[operator,index]


def _save(figure, out_dir: Path, filename: str) -> None:
    with warnings.catch_warnings():
        # a name in a script the font lacks (CJK, emoji) is drawn as boxes: the page's text names it, no warning needed
        warnings.filterwarnings("ignore", "Glyph .* missing from font", UserWarning)
        figure.tight_layout()
        figure.savefig(out_dir / filename, dpi=110)
    plt.close(figure)


def _performance_figure(rows: list[PerfRow], model: str, gpu: str, out_dir: Path, filename: str) -> Figure:
    kind = rows[0].kind
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for label, points in _series(rows).items():
        line, = axes.plot([p.batch for p in points], [p.value for p in points], marker="o", label=label)
        _error_bars(axes, [p for p in points if p.interval is not None], line.get_color())
    if kind == "synthetic":
        # a GPU's peak only for results that ran on a GPU (a CPU run may carry a GPU's tag, --force-gpu-tag)
        peaks = sorted({(row.precision, row.accumulation or "fp32") for row in rows
                        if row.value is not None and row.result.job.device == "cuda"})
        for precision, accumulation in peaks:
            peak = peak_tflops(gpu, precision, accumulation)
            if peak:
                axes.axhline(peak, linestyle="--", color="grey",
                             label=f"{gpu} peak {precision} ({accumulation} acc.) {peak:g} TFLOPS")
    _batch_axis(axes, sorted({row.batch for row in rows}))
    if kind == "llm":  # throughput spans decades from batch 1 to 64; on a log axis a speedup is a constant gap
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        axes.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    axes.set_ylabel("tokens/s" if kind == "llm" else "TFLOPS")
    title = f"{model} on {gpu}: " + ("throughput" if kind == "llm" else "TFLOPS")
    axes.set_title(title)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    _save(figure, out_dir, filename)
    return Figure(kind, title, filename)


def _energy_figure(rows: list[PerfRow], model: str, gpu: str, out_dir: Path, filename: str) -> Figure:
    """Each cell's energy (J/token or J/call) against its speed, both with their 95 % intervals, one marker series per
    workflow, each point labelled with its batch size: down and right is better on both."""
    kind = rows[0].kind
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for label, points in _series([row for row in rows if row.energy is not None]).items():
        energies = [point.energy[0] for point in points]  # type: ignore[index]
        speeds = [point.value for point in points]
        markers = axes.errorbar(
            speeds, [energy.value for energy in energies], fmt="o", capsize=3, label=label,
            xerr=[[speed - (point.interval[0] if point.interval else speed) for speed, point in zip(speeds, points)],
                  [(point.interval[1] if point.interval else speed) - speed for speed, point in zip(speeds, points)]],
            yerr=[[energy.value - (energy.low if energy.low is not None else energy.value) for energy in energies],
                  [(energy.high if energy.high is not None else energy.value) - energy.value for energy in energies]])
        for point, speed, energy in zip(points, speeds, energies):
            axes.annotate(f"b{point.batch}", (speed, energy.value), textcoords="offset points", xytext=(4, 4),
                          fontsize=7, color=markers[0].get_color())
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("tokens/s" if kind == "llm" else "TFLOPS")
    axes.set_ylabel("J per generated token" if kind == "llm" else "J per call")
    axes.grid(True, which="major", alpha=0.3)
    title = f"{model} on {gpu}: energy against speed"
    axes.set_title(title)
    axes.legend(fontsize=8)
    _save(figure, out_dir, filename)
    return Figure(kind, title, filename)


def _comparison_figure(comparison: Comparison, out_dir: Path, filename: str) -> Figure:
    rows = [row for row in comparison.rows if row.ratio is not None]
    labels = [f"{row.model} {row.workflow} b{row.batch} [{row.fixed}]"
              + (" (device time)" if row.figure == "device time" else "") for row in rows]
    figure, axes = plt.subplots(figsize=(8, max(2.5, 0.28 * len(rows) + 1.2)))
    # the ratio a row is judged on: of device times where the cells are under a millisecond and both have them
    axes.barh(range(len(rows)), [row.change.value if row.change else row.ratio for row in rows], color="#4878a8")
    spans = [(position, row.change) for position, row in enumerate(rows)
             if row.change is not None and row.change.low is not None and row.change.high is not None]
    if spans:
        below = [change.value - change.low for _, change in spans]  # type: ignore[operator]
        above = [change.high - change.value for _, change in spans]  # type: ignore[operator]
        axes.errorbar([change.value for _, change in spans], [position for position, _ in spans], fmt="none",
                      ecolor="black", capsize=3, xerr=[below, above])
    axes.set_yticks(range(len(rows)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel(f"{comparison.second} / {comparison.first} (tokens/s or TFLOPS; 95 % interval)")
    title = f"{comparison.title}"
    axes.set_title(title)
    _save(figure, out_dir, filename)
    return Figure("compare", title, filename)


def _generation_figure(rows: list[GenerationRow], comparison: Comparison, out_dir: Path, filename: str) -> Figure:
    """Each workflow's gain from one GPU to the other per batch size, with its interval, against the two lines the
    hardware predicts: the ratio of bandwidths (memory-bound) and of peaks (compute-bound)."""
    figure, axes = plt.subplots(figsize=(8, max(2.8, 0.3 * len(rows) + 1.4)))
    positions = range(len(rows))
    axes.barh(positions, [row.ratio for row in rows], color="#4878a8")
    spans = [(position, row) for position, row in zip(positions, rows) if row.has_interval]
    if spans:
        errors = [[row.ratio - row.low for _, row in spans], [row.high - row.ratio for _, row in spans]]
        axes.errorbar([row.ratio for _, row in spans], [position for position, _ in spans], xerr=errors, fmt="none",
                      ecolor="black", capsize=3)
    axes.set_yticks(positions, [f"{row.kind}: {row.workflow} b{row.batch} ({row.cells})"
                                + ("" if row.has_interval else ", no interval") for row in rows], fontsize=7)
    axes.invert_yaxis()
    for expected in sorted({row.expected for row in rows}, key=lambda e: (e.bandwidth, e.peak)):
        axes.axvline(expected.bandwidth, color="#c44e52", linestyle="--",
                     label=f"bandwidth ratio {expected.bandwidth:.2f}× (memory-bound)")
        axes.axvline(expected.peak, color="grey", linestyle=":", label=f"peak ratio {expected.peak:.2f}× (compute-bound)")
    axes.set_xlabel(f"{comparison.second} / {comparison.first}: geometric mean over the models (95 % interval)")
    title = f"{comparison.second} vs {comparison.first}: what each workflow gains"
    axes.set_title(title)
    axes.legend(fontsize=7, loc="lower right")
    _save(figure, out_dir, filename)
    return Figure("compare", title, filename)


def write_figures(report: Report, out_dir: Path) -> list[Figure]:
    """Throughput (LLM) and TFLOPS (synthetic) vs batch per model and GPU, energy against speed per model and GPU
    where cells measured it, one bar chart per comparison, and for two GPUs each workflow's gain against the bandwidth
    and peak ratios."""
    groups: dict[tuple[str, str, str], list[PerfRow]] = defaultdict(list)
    for row in report.perf:
        groups[(row.kind, row.model, row.gpu)].append(row)
    names = _FileNames()
    figures = [_performance_figure(rows, model, gpu, out_dir, names(kind, model, gpu))
               for (kind, model, gpu), rows in sorted(groups.items()) if any(row.value is not None for row in rows)]
    figures += [_energy_figure(rows, model, gpu, out_dir, names(f"{kind}-energy", model, gpu))
                for (kind, model, gpu), rows in sorted(groups.items()) if any(row.energy is not None for row in rows)]
    figures += [_comparison_figure(comparison, out_dir,
                                   names(f"compare-{comparison.axis}", comparison.first, "vs", comparison.second))
                for comparison in report.comparisons]
    for comparison in report.comparisons:
        rows = generation_rows(comparison)
        if rows:
            figures.append(_generation_figure(rows, comparison, out_dir,
                                              names("generations", comparison.first, "vs", comparison.second)))
    return figures
