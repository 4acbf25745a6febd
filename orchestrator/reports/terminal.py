"""A report's sections as rich renderables for the terminal."""

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from mlcbench.orchestrator.reports.fmt import printable
from mlcbench.orchestrator.reports.report import Report
from mlcbench.orchestrator.reports.statuses import look
from mlcbench.orchestrator.reports.table import Block, Cell, Paragraph, Section, Table


def _cell(cell: Cell) -> Text:
    # a tooltip and footnotes have no place here: the reasons behind a support cell have their own table
    return Text(printable(cell.text), style=look(cell.tone).terminal if cell.tone else "")


def table(table: Table) -> Group:
    rich_table = RichTable(title=Text(printable(f"{table.title} ({table.caption})" if table.title else table.caption)))
    for column in table.columns:
        rich_table.add_column(Text(printable(column.header)), justify="right" if column.numeric else "left",
                              overflow="fold")
    for row in table.rows:
        rich_table.add_row(*(_cell(cell) for cell in row))
    return Group(rich_table, *(Text(printable(f"  {note}")) for note in table.notes))


def _block(block: Block) -> RenderableType:
    if isinstance(block, Table):
        return table(block)
    if isinstance(block, Paragraph):
        return Text(printable(block.text), style="dim")
    items = [Text(printable(f"  {item}"), style="dim") for item in block.items]
    return Group(*([Text(printable(block.title), style="bold")] if block.title else []), *items)


def section(section: Section) -> Group:
    # figures are drawn for the HTML report only: a terminal shows no images
    return Group(Text(printable(f"\n{section.heading}"), style="bold underline"),
                 *(_block(block) for block in section.blocks))


def blocks(blocks: tuple[Block, ...]) -> list[RenderableType]:
    return [_block(block) for block in blocks]


def report_renderables(report: Report) -> list[RenderableType]:
    return [Text(printable(report.heading)), *(section(part) for part in report.sections())]
