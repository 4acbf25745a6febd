"""What a report section shows, neutral of where it is shown: sections of tables and text that the terminal, Markdown
and HTML writers only render (reports/sections/ builds them)."""

from dataclasses import dataclass
from typing import Literal, Optional, Union

from mlcbench.schema import Status

# A cell's tone: a run's status, a failed correctness check, or a figure flagged ⚠ (statuses.py gives each its look).
Tone = Union[Status, Literal["fail", "flagged"]]
# The HTML figures a section holds (reports/figures.py).
FigureGroup = Literal["llm", "synthetic", "compare"]


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Optional[Tone] = None
    tooltip: Optional[str] = None  # where a reader can hover (HTML): the provenance of a number, a cell's reasons
    footnotes: tuple[str, ...] = ()  # texts the HTML writer numbers under the section (the reasons behind a cell)


@dataclass(frozen=True)
class Table:
    title: str
    caption: str  # what the cells hold
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = ()  # a list under the table (the fastest workflow per batch size)


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    title: Optional[str]
    items: tuple[str, ...]


Block = Union[Table, Paragraph, Bullets]


@dataclass(frozen=True)
class Section:
    heading: str
    blocks: tuple[Block, ...]
    figures: Optional[FigureGroup] = None


def text_cells(*texts: str) -> tuple[Cell, ...]:
    return tuple(Cell(text) for text in texts)


def table_section(heading: str, caption: str, columns: tuple[Column, ...],
                  rows: tuple[tuple[Cell, ...], ...]) -> Optional[Section]:
    """A section of one table under its heading; none where the table has no rows."""
    return Section(heading, (Table("", caption, columns, rows),)) if rows else None
