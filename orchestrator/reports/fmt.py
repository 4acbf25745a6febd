"""Number formatting shared by the terminal, HTML and Markdown writers (plain text, no markup)."""

from typing import TYPE_CHECKING, Optional


def printable(text: str) -> str:
    """Stored text as it may reach a terminal: a character that would act on it (an escape sequence, a control)
    written as Python writes it ('\\x1b'). Names are checked where they enter; stores written before may hold any."""
    return "".join(char if char.isprintable() or char == "\n" else char.encode("unicode_escape").decode("ascii")
                   for char in text)


def number(value: Optional[float], digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def ratio(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2f}×"


def percent(value: Optional[float]) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def gigabytes(value: Optional[int]) -> str:
    return "—" if value is None else f"{value / 1e9:.2f} GB"


def cold_warm(cold: Optional[float], cold_n: int, warm: Optional[float], warm_n: int) -> str:
    """Compile seconds with the caches empty / full, each with its number of processes: "18.3 (n=1) / 4.5 (n=4)"."""
    if cold is None and warm is None:
        return "—"
    return " / ".join("—" if seconds is None else f"{number(seconds)} (n={n})"
                      for seconds, n in ((cold, cold_n), (warm, warm_n)))


def interval(value: Optional[float], bounds: Optional[tuple[float, float]], digits: int = 1) -> str:
    """'287.1 [280.2–295.0]': a figure with its 95 % interval."""
    if value is None:
        return "—"
    text = number(value, digits)
    return text if bounds is None else f"{text} [{number(bounds[0], digits)}–{number(bounds[1], digits)}]"


def estimate(figure: Optional["Estimate"], unit: str = "") -> str:
    """'0.372 [0.365–0.380] J/token': a figure over processes to three significant digits, with its interval."""
    if figure is None:
        return "—"
    text = f"{figure.value:.3g}"
    if figure.low is not None and figure.high is not None:
        text += f" [{figure.low:.3g}–{figure.high:.3g}]"
    return f"{text} {unit}" if unit else text


def evidence(row: "PerfRow") -> str:
    """Which processes the figure combines and, where it cannot carry a verdict, why: 'warm', 'n=1', 'n=2, no
    verdict', 'check FAILED: no speedup, no verdict'."""
    parts = [row.series] if row.series else []
    why = row.no_verdict
    if why == "check failed":
        parts.append("✗ check FAILED: no speedup, no verdict")
    elif why == "n=1":
        parts.append(why)
    elif why and why != "not compiled":
        parts.append(f"{why}, no verdict")
    return " ".join(parts)


# how a cell's device time was taken (Timing.device_method), in words
DEVICE_METHODS = {"cuda_graph_replay_queued": "CUDA-graph replay",
                  "cuda_graph_replay": "CUDA-graph replay, its launch included",
                  "profiler_kernels": "profiler kernel sum"}


def perf(row: "PerfRow") -> str:
    """A throughput cell: the figure with its interval and evidence, the device-time figure where there is one, the
    speedup over eager (or why there is none), the flags."""
    digits = 1 if row.kind == "llm" else 2
    text = interval(row.value, row.interval, digits)
    if evidence(row):
        text += f" {evidence(row)}"
    other = row.set_aside
    if other is not None:
        text += (f"; {other.name} series (another program, not in the figure) "
                 f"{interval(other.value, other.interval, digits)} n={other.processes}")
    device = row.device
    if device is not None:
        how = DEVICE_METHODS.get(device.method or "", "method not recorded")
        text += f"; device time ({how}) {interval(device.value, device.interval, digits)}"
    if row.not_compiled:
        text += " (not compiled)"
    elif row.speedup is not None:
        label = row.speedup.label()
        text += f" {label}" if label.startswith("≈") else f" ({label})"
    flags = row.flags()
    return text + (f" ⚠ {', '.join(flags)}" if flags else "")


def of_bound(fraction: Optional[float]) -> str:
    """A fraction of a bound; over 100 % is printed as what it means, never as a figure."""
    if fraction is not None and fraction > 1:
        return "over 100 % (bound or timing wrong)"
    return percent(fraction)


def bounds(row: "PerfRow") -> str:
    """'41.0 % spec / 45.3 % measured': of the catalog's spec bound, and of the bound the sweep measured on the GPU
    ('no step time' for an LLM result stored without it, '' when neither is known)."""
    if row.step_time_missing:
        return "no step time"
    if row.efficiency is None and row.measured_efficiency is None:
        return ""
    if row.measured_efficiency is None:
        return f"{of_bound(row.efficiency)} spec"
    if row.efficiency is None:
        return f"{of_bound(row.measured_efficiency)} measured"
    return f"{of_bound(row.efficiency)} spec / {of_bound(row.measured_efficiency)} measured"


if TYPE_CHECKING:
    from mlcbench.orchestrator.reports.data import PerfRow
    from mlcbench.schema.results import Estimate
