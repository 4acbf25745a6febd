"""Number formatting shared by the terminal, HTML and Markdown writers (plain text, no markup)."""

from typing import TYPE_CHECKING, Optional


def number(value: Optional[float], digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def ratio(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2f}×"


def percent(value: Optional[float]) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def gigabytes(value: Optional[int]) -> str:
    return "—" if value is None else f"{value / 1e9:.2f} GB"


def check(passed: Optional[bool]) -> str:
    return "not checked" if passed is None else "pass" if passed else "FAIL"


def cold_warm(cold: Optional[float], warm: Optional[float]) -> str:
    """Compile seconds with Inductor's cache empty / full, e.g. "18.3 / 4.5"."""
    return "—" if cold is None and warm is None else f"{number(cold)} / {number(warm)}"


def interval(value: Optional[float], bounds: Optional[tuple[float, float]], digits: int = 1) -> str:
    """'287.1 [280.2–295.0]': a figure with its 95 % interval."""
    if value is None:
        return "—"
    text = number(value, digits)
    return text if bounds is None else f"{text} [{number(bounds[0], digits)}–{number(bounds[1], digits)}]"


def perf(row: "PerfRow") -> str:
    """A throughput cell: the figure with its interval, the speedup over eager (or why there is none), the flags."""
    text = interval(row.value, row.interval, 1 if row.kind == "llm" else 2)
    if row.not_compiled:
        text += " (not compiled)"
    elif row.speedup is not None:
        label = row.speedup.label()
        text += f" {label}" if label.startswith("≈") else f" ({label})"
    flags = row.flags()
    return text + (f" ⚠ {', '.join(flags)}" if flags else "")


def bounds(row: "PerfRow") -> str:
    """'41.0 % spec / 45.3 % measured': of the catalog's spec bound, and of the bound the sweep measured on the GPU
    ('' when neither is known)."""
    if row.efficiency is None and row.measured_efficiency is None:
        return ""
    if row.measured_efficiency is None:
        return f"{percent(row.efficiency)} spec"
    if row.efficiency is None:
        return f"{percent(row.measured_efficiency)} measured"
    return f"{percent(row.efficiency)} spec / {percent(row.measured_efficiency)} measured"


def ceiling(row: "CeilingRow") -> tuple[str, str]:
    """(copy bandwidth, matmul rates), each 'measured (spec)'."""
    copy = f"{number(row.copy_gbs, 0)} GB/s (spec {number(row.spec_gbs, 0)})"
    gemm = ", ".join(f"{precision} {number(tflops, 1 if tflops >= 10 else 3)} TFLOPS (spec {number(spec, 1)})"
                     for precision, tflops, spec in row.gemm)
    return copy, gemm + (f"; error: {row.error}" if row.error else "")


if TYPE_CHECKING:
    from mlcbench.orchestrator.reports.data import CeilingRow, PerfRow
