"""Number formatting shared by the terminal, HTML and Markdown writers (plain text, no markup)."""

from typing import Optional


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
