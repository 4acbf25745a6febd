"""How each status a result can end with looks in a report: one row per `schema.Status`, most serious first."""

from dataclasses import dataclass

from mlcbench.orchestrator.reports.table import Tone
from mlcbench.schema import Status


@dataclass(frozen=True)
class StatusLook:
    terminal: str  # rich style
    css: str  # the declarations of the HTML class named after the status


STATUSES: dict[Status, StatusLook] = {
    "crashed": StatusLook("red bold", "background: #e59a9a;"),
    "failed": StatusLook("red", "background: #f8c9c9;"),
    "timeout": StatusLook("yellow", "background: #fbeab5;"),
    "oom": StatusLook("magenta", "background: #ecd5f5;"),
    "unsupported": StatusLook("dim", "background: #eee; color: #666;"),
    "ok": StatusLook("green", "background: #d9f2d9;"),
}
# The status a support-matrix cell takes when its runs disagree: the first of these among them.
SEVERITY: tuple[Status, ...] = tuple(STATUSES)


def terminal_style(status: str) -> str:
    """A status's rich style; none for a status a newer store holds and this code does not know."""
    look = STATUSES.get(status)  # type: ignore[call-overload]
    return look.terminal if look else ""


# the other tones a cell can take (table.Tone)
MARKS: dict[str, StatusLook] = {
    "fail": StatusLook("red", "color: #b00; font-weight: bold;"),
    "flagged": StatusLook("yellow", "background: #fff3c4;"),
}


def look(tone: Tone) -> StatusLook:
    return STATUSES[tone] if tone in STATUSES else MARKS[tone]  # type: ignore[index]
