"""A static, self-contained HTML report: index.html plus the PNG figures beside it, no external URLs."""

from html import escape
from pathlib import Path

from mlcbench.orchestrator.outputs import write_atomically
from mlcbench.orchestrator.reports.figures import Figure, write_figures
from mlcbench.orchestrator.reports.report import Report
from mlcbench.orchestrator.reports.statuses import MARKS, STATUSES
from mlcbench.orchestrator.reports.table import Block, Cell, Column, Paragraph, Section, Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { text-align: left; background: #f4f4f4; }
th:first-child, td:first-child, td.text { text-align: left; }
caption { text-align: left; font-weight: bold; padding: 4px 0; }
figure { display: inline-block; margin: 0 1em 1em 0; width: 640px; } img { width: 100%; }
sup { color: #555; } .note { color: #555; font-size: 13px; }
""" + "".join(f".{name} {{ {look.css} }}\n" for name, look in (*STATUSES.items(), *MARKS.items()))

# Lets a headless browser (and a reader's devtools) tell that every figure loaded.
IMAGES_CHECK = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  document.body.dataset.imageCount = String(images.length);
  document.body.dataset.imagesOk = String(images.length > 0 && images.every(function (image) {
    return image.complete && image.naturalWidth > 0;
  }));
});
"""


def _cell(cell: Cell, column: Column, footnotes: dict[str, int]) -> str:
    css = " ".join(name for name in (cell.tone, None if column.numeric else "text") if name)
    attributes = (f' class="{css}"' if css else "") + (f' title="{escape(cell.tooltip)}"' if cell.tooltip else "")
    marks = [footnotes.setdefault(note, len(footnotes) + 1) for note in cell.footnotes]
    sup = f"<sup>{','.join(str(mark) for mark in marks)}</sup>" if marks else ""
    return f"<td{attributes}>{escape(cell.text)}{sup}</td>"


def table(table: Table, footnotes: dict[str, int]) -> str:
    caption = f"{table.title} ({table.caption})" if table.title else table.caption
    if any(cell.tooltip for row in table.rows for cell in row):
        caption += "; hover a cell for where it comes from"
    head = "".join(f"<th>{escape(column.header)}</th>" for column in table.columns)
    rows = "".join("<tr>" + "".join(_cell(cell, column, footnotes) for cell, column in zip(row, table.columns))
                   + "</tr>" for row in table.rows)
    notes = "".join(f"<li>{escape(note)}</li>" for note in table.notes)
    return (f"<table><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            + (f'<ul class="note">{notes}</ul>' if notes else ""))


def _block(block: Block, footnotes: dict[str, int]) -> str:
    if isinstance(block, Table):
        return table(block, footnotes)
    if isinstance(block, Paragraph):
        return f'<p class="note">{escape(block.text)}</p>'
    items = "".join(f"<li>{escape(item)}</li>" for item in block.items)
    return (f"<h3>{escape(block.title)}</h3>" if block.title else "") + f'<ul class="note">{items}</ul>'


def section(section: Section, figures: list[Figure]) -> str:
    """The section's figures first, then its blocks, then the footnotes its cells' marks point to."""
    footnotes: dict[str, int] = {}
    images = "".join(f'<figure><img src="{escape(figure.filename)}" alt="{escape(figure.title)}"></figure>'
                     for figure in figures if figure.section == section.figures)
    body = "".join(_block(block, footnotes) for block in section.blocks)
    notes = "".join(f"<li>{escape(note)}</li>" for note in footnotes)
    return (f"<section><h2>{escape(section.heading)}</h2>{images}{body}"
            + (f'<ol class="note">{notes}</ol>' if notes else "") + "</section>")


def write_html(report: Report, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = write_figures(report, out_dir)
    header = (f"<h1>mlcbench report</h1><p class=\"note\">{escape(report.heading)}; generated "
              f"{report.generated_at:%Y-%m-%d %H:%M} UTC.</p>")
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlcbench report</title>"
            f"<style>{STYLE}</style></head><body>{header}{''.join(section(part, figures) for part in report.sections())}"
            f"<script>{IMAGES_CHECK}</script></body></html>")
    index = out_dir / "index.html"
    write_atomically(index, lambda path: path.write_text(page, encoding="utf-8"))
    return index
