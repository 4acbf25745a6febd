"""Each report section is declared once: the terminal, Markdown and HTML writers render the same tables with the same
columns; one status table covers every status a result can have; only loading.py reads the store."""

import ast
import re
from html import unescape
from pathlib import Path
from typing import get_args

from rich.console import Console

from mlcbench.orchestrator.reports.data import CellKey
from mlcbench.orchestrator.reports.html import write_html
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.reports.statuses import SEVERITY, STATUSES
from mlcbench.orchestrator.reports.table import Table
from mlcbench.orchestrator.reports.terminal import report_renderables
from mlcbench.schema import Calibration, Status
from tests.reports.conftest import T0, fixture_results

REPORTS = Path(__file__).resolve().parents[2] / "orchestrator" / "reports"


def _report():
    """Every section has something to show: failed checks, comparisons, measured ceilings."""
    ceiling = Calibration(device="cuda", copy_bytes=1 << 30, copy_gbs=3000.0, gemm_n=8192, gemm_tflops={"bf16": 800.0},
                          gpu_tag="h100", env="local", sweep_id="s1", measured_at=T0)
    return build_report(fixture_results(), "test", Selection(), calibrations=(ceiling,))


def _terminal_header_rows(report) -> list[list[str]]:
    console = Console(width=2000, record=True)
    for renderable in report_renderables(report):
        console.print(renderable)
    return [[cell.strip() for cell in line.split("┃")[1:-1]] for line in console.export_text().splitlines()
            if line.startswith("┃")]


def test_every_section_has_the_same_columns_in_the_terminal_markdown_and_html(tmp_path: Path):
    report = _report()
    sections = report.sections()
    assert {"Support matrix", "LLM throughput (tokens/s)", "Compile time and peak memory", "Correctness checks that failed",
            "Across GPUs and envs", "P3 summary", "The GPU's ceilings", "Provenance"} <= {s.heading for s in sections}
    tables = [block for section in sections for block in section.blocks if isinstance(block, Table)]
    headers = [[column.header for column in table.columns] for table in tables]
    text = markdown(report).splitlines()
    page = write_html(report, tmp_path / "html").read_text()
    html_headers = [[unescape(h) for h in re.findall(r"<th>(.*?)</th>", thead)]
                    for thead in re.findall(r"<thead>(.*?)</thead>", page)]
    markdown_headers = [[cell.strip() for cell in line.strip("|").split(" | ")]
                        for line, rule in zip(text, text[1:]) if re.fullmatch(r"\|(---:?\|)+", rule)]
    assert len(headers) > 10  # every table of the report, in its order
    assert html_headers == headers
    assert markdown_headers == headers
    assert _terminal_header_rows(report) == headers
    # the cost table, whose columns differed most between the writers, has them all
    [costs] = [table for section in sections if section.heading == "Compile time and peak memory"
               for table in section.blocks]
    assert [column.header for column in costs.columns] == [
        "model", "workflow", "options", "precision", "batch", "gpu", "env", "compile s (median)", "compile s (max)",
        "cold / warm s (processes)", "load s (median)", "compiler import s", "peak memory", "beside others"]


def test_the_status_table_has_every_status_a_result_can_end_with_and_no_other():
    assert set(STATUSES) == set(get_args(Status))
    assert SEVERITY[0] == "crashed" and SEVERITY[-1] == "ok"


def test_every_status_has_its_own_html_class(tmp_path: Path):
    page = write_html(_report(), tmp_path / "html").read_text()
    for status, look in STATUSES.items():
        assert f".{status} {{ {look.css} }}" in page


def test_only_the_loading_module_reads_the_store():
    readers = []
    for path in sorted(REPORTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            if any(name.startswith(("mlcbench.orchestrator.store", "mlcbench.orchestrator.reports.loading"))
                   for name in names):
                readers.append(path.relative_to(REPORTS).as_posix())
    assert readers == ["loading.py"]


def test_a_cell_key_holds_every_coordinate_of_a_cell():
    [result] = [r for r in fixture_results() if (r.job.model, r.job.workflow, r.job.batch_size, r.provenance.gpu_tag,
                                                  r.provenance.env) == ("ffn-tinyllama", "eager", 64, "h100", "local")]
    assert CellKey.of(result) == CellKey("h100", "local", "ffn-tinyllama", "eager", "bf16", 64,
                                         result.job.cell_settings)
    other_job = result.job.model_copy(update={"repeats": 3})
    other = result.model_copy(update={"job": other_job, "job_id": other_job.job_id})
    assert CellKey.of(other) != CellKey.of(result)  # other settings, another cell
