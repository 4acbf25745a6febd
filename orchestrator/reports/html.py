"""A static, self-contained HTML report: index.html plus the PNG figures beside it, no external URLs."""

from html import escape
from pathlib import Path
from typing import Iterable, Optional

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.crossgen import host_lines
from mlcbench.orchestrator.reports.data import (RULES, Comparison, PerfRow, SupportMatrix, ThroughputTable,
                                                ceiling_rows, provenance_line)
from mlcbench.orchestrator.outputs import write_atomically
from mlcbench.orchestrator.reports.figures import Figure, write_figures
from mlcbench.orchestrator.reports.p3 import RUBRIC
from mlcbench.orchestrator.reports.report import Report

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th { text-align: left; background: #f4f4f4; }
th:first-child, td:first-child, td.text { text-align: left; }
caption { text-align: left; font-weight: bold; padding: 4px 0; white-space: nowrap; }
.ok { background: #d9f2d9; } .unsupported { background: #eee; color: #666; } .failed { background: #f8c9c9; }
.oom { background: #ecd5f5; } .timeout { background: #fbeab5; } .crashed { background: #e59a9a; }
.fail { color: #b00; font-weight: bold; } .flagged { background: #fff3c4; }
figure { display: inline-block; margin: 0 1em 1em 0; width: 640px; } img { width: 100%; }
sup { color: #555; } .note { color: #555; font-size: 13px; }
"""

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


def _cell(text: str, css: str = "", title: Optional[str] = None, footnote_marks: tuple[int, ...] = ()) -> str:
    attributes = (f' class="{css}"' if css else "") + (f' title="{escape(title)}"' if title else "")
    marks = f"<sup>{','.join(str(m) for m in footnote_marks)}</sup>" if footnote_marks else ""
    return f"<td{attributes}>{escape(text)}{marks}</td>"


def _table(caption: str, headers: Iterable[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return (f"<table><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _perf_cell(row: Optional[PerfRow]) -> str:
    if row is None:
        return "<td></td>"
    if row.value is None:
        return _cell(row.status, row.status, f"{row.reason or row.status} — {provenance_line(row.result)}")
    text = fmt.perf(row)
    css = "fail" if row.check_failed else "flagged" if row.flags() else ""
    return _cell(text, css, provenance_line(row.result))


def _efficiency_cell(row: Optional[PerfRow]) -> str:
    return "<td></td>" if row is None or row.value is None else _cell(fmt.bounds(row) or "—")


def _throughput_table(table: ThroughputTable) -> str:
    efficiency = "of decode bandwidth bound (spec / measured)" if table.kind == "llm" else "of peak (spec / measured)"
    # no bound columns where no cell has a bound (a CPU run)
    bounds = table.batches if any(fmt.bounds(row) for line in table.lines for row in line.cells.values()) else ()
    headers = ["workflow"] + [f"b{b}" for b in table.batches] + [f"b{b} {efficiency}" for b in bounds]
    rows = [("<tr>" + _cell(line.workflow, "text")
             + "".join(_perf_cell(line.cells.get(b)) for b in table.batches)
             + "".join(_efficiency_cell(line.cells.get(b)) for b in bounds) + "</tr>") for line in table.lines]
    verdicts = "".join(f"<li>{escape(verdict.text)}</li>" for verdict in table.fastest)
    return _table(table.title + " (value [95 % interval], the processes it combines, speedup over eager; ≈ = not "
                  "significant; ✗ = correctness check failed; hover for provenance)", headers, rows) + (
        f'<ul class="note">{verdicts}</ul>' if verdicts else "")


def _support_matrix(matrix: SupportMatrix, footnotes: dict[str, int]) -> str:
    headers = ["workflow"] + [f"{env} @ {gpu}" for env, gpu in matrix.columns]
    rows = []
    for workflow in matrix.workflows:
        cells = []
        for env, gpu in matrix.columns:
            cell = matrix.cell(workflow, env, gpu)
            if cell is None:
                cells.append("<td>not run</td>")
                continue
            marks = tuple(footnotes.setdefault(reason, len(footnotes) + 1) for reason in cell.reasons)
            cells.append(_cell(cell.label, cell.status, "\n".join(cell.reasons) or None, marks))
        rows.append("<tr>" + _cell(workflow, "text") + "".join(cells) + "</tr>")
    return _table(f"{matrix.model}: support matrix (hover a cell for its reasons)", headers, rows)


def _section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{body}</section>"


def _figures(figures: list[Figure], section: str) -> str:
    return "".join(f'<figure><img src="{escape(f.filename)}" alt="{escape(f.title)}"></figure>'
                   for f in figures if f.section == section)


def _host_notes(comparison: Comparison) -> str:
    return "".join(f'<p class="note">{escape(line)}</p>' for line in host_lines(comparison))


def _sections(report: Report, figures: list[Figure]) -> list[str]:
    footnotes: dict[str, int] = {}
    matrices = "".join(_support_matrix(matrix, footnotes) for matrix in report.support)
    notes = "".join(f"<li>{escape(reason)}</li>" for reason in footnotes)
    sections = [_section("Support matrix", matrices + (f'<ol class="note">{notes}</ol>' if notes else ""))]

    # the GPU's peak is drawn only where a result ran on a catalogued GPU (never for a CPU run)
    with_peak = any(row.kind == "synthetic" and row.efficiency is not None for row in report.perf)
    for kind, title in (("llm", "LLM throughput (tokens/s) vs batch size"),
                        ("synthetic", "Synthetic models: TFLOPS vs batch size"
                         + (", with the GPU's peak" if with_peak else ""))):
        tables = "".join(_throughput_table(t) for t in report.tables if t.kind == kind)
        if tables:
            sections.append(_section(title, _figures(figures, kind) + tables + f'<p class="note">{escape(RULES)}</p>'))

    cost_rows = [("<tr>" + _cell(c.model, "text") + _cell(c.workflow, "text") + _cell(c.gpu, "text")
                  + _cell(c.env, "text") + _cell(", ".join(str(b) for b in c.batches_ok))
                  + _cell(fmt.number(c.compile_s_median)) + _cell(fmt.number(c.compile_s_max))
                  + _cell(fmt.cold_warm(c.compile_cold_s, c.compile_cold_n, c.compile_warm_s, c.compile_warm_n))
                  + _cell(fmt.number(c.load_s_median)) + _cell(fmt.gigabytes(c.peak_mem_bytes))
                  + _cell("—" if c.peak_mem_batch is None else f"b{c.peak_mem_batch}") + "</tr>") for c in report.costs]
    sections.append(_section("Compile time and peak memory", _table(
        "over the runs that ended ok", ["model", "workflow", "gpu", "env", "batches ok", "compile s (median)",
                                        "compile s (max)", "cold / warm s (processes)", "load s (median)",
                                        "peak memory",
                                        "at batch"], cost_rows)))
    if report.spread:
        sections.append(_section("Between-process spread of the synthetic cells", _table(
            "max / min of the process medians: of the whole call, and of the device time of the same processes",
            fmt.SPREAD_HEADER, [("<tr>" + "".join(_cell(text, "text" if i < 5 else "") for i, text in
                                                   enumerate(fmt.spread(row))) + "</tr>") for row in report.spread])))
    if report.decode:
        lines = "".join(f"<li>{escape(line.describe())}</li>" for line in report.decode)
        sections.append(_section("Where decode time goes (per-step time of the timed calls against the memory bound)",
                                 f"<ul>{lines}</ul>"))

    check_rows = [("<tr>" + _cell(c.model, "text") + _cell(c.workflow, "text") + _cell(c.gpu, "text")
                   + _cell(c.env, "text") + _cell(c.precision, "text") + _cell(str(c.batch))
                   + _cell(fmt.number(c.cosine, 5)) + _cell(fmt.number(c.rel_l2_error, 4))
                   + _cell(fmt.number(c.max_abs_diff, 4)) + _cell(fmt.percent(c.token_agreement))
                   + _cell(fmt.number(c.tolerance, 3)) + _cell(c.where, "text") + "</tr>") for c in report.failed_checks]
    sections.append(_section("Correctness checks that failed", _table(
        f"{len(check_rows)} result(s) differ from eager beyond tolerance",
        ["model", "workflow", "gpu", "env", "precision", "batch", "cosine", "rel. L2 error", "max abs diff",
         "token agreement", "tolerance", "checked how, failed where"], check_rows) if check_rows
        else '<p class="note">No stored correctness check failed.</p>'))

    if report.comparisons:
        compare_tables = "".join(_host_notes(comparison) + _table(comparison.title, [
            "model", "workflow", "batch", "fixed", "unit", comparison.first, comparison.second,
            "ratio [95 % interval]", "flags"],
            [("<tr>" + _cell(r.model, "text") + _cell(r.workflow, "text") + _cell(str(r.batch))
              + _cell(r.fixed, "text") + _cell(r.unit, "text") + _cell(fmt.number(r.first, 2))
              + _cell(fmt.number(r.second, 2)) + _cell(r.label()) + _cell(", ".join(r.flags), "text flagged"
                                                                         if r.flags else "text")
              + "</tr>") for r in comparison.rows]) + f'<p class="note">{escape(comparison.summary())}</p>'
            for comparison in report.comparisons)
        sections.append(_section("Across GPUs and envs", _figures(figures, "compare") + compare_tables))

    p3_rows = [("<tr>" + _cell(p.workflow, "text")
                + _cell(f"{p.performance or '—'} ({fmt.p3_speedups(p)})")
                + _cell(f"{p.productivity or '—'} ({fmt.number(p.median_compile_s)} s"
                        + (", own decode loop" if p.custom_decode_loop else "") + ")")
                + _cell(f"{p.portability} ({p.cells_ran}/{p.cells_tried} cells)")
                + _cell(f"{p.input_flexibility} ({p.batches_ran}/{p.batches_tried} batches"
                        + (", dynamic shapes" if p.dynamic_shapes else "") + ")")
                + _cell(f"{p.architecture} ({', '.join(p.gpus_ran) or 'none'} of {', '.join(p.gpus_in_report)})")
                + _cell(f"{p.checks_failed} of {p.checks}", "fail" if p.checks_failed else "") + "</tr>")
               for p in report.p3]
    rubric = "".join(f"<li><b>{escape(name)}</b>: {escape(text)}</li>" for name, text in RUBRIC)
    sections.append(_section("P3 summary", _table(
        "scores 1 (worst) to 5 (best), from the data in this report",
        ["workflow", "performance", "productivity", "portability", "input flexibility", "architecture support",
         "failed checks"], p3_rows) + f'<h3>Rubric</h3><ul class="note">{rubric}</ul>'))

    if report.calibrations:
        sections.append(_section("The GPU's ceilings", _table(
            "measured once per GPU per sweep (spec from the catalog)",
            ["gpu", "env", "sweep", "device-to-device copy (read + written)", "matmul"],
            [("<tr>" + _cell(c.gpu, "text") + _cell(c.env, "text") + _cell(c.sweep, "text")
              + "".join(_cell(text, "text") for text in fmt.ceiling(c)) + "</tr>")
             for c in ceiling_rows(report.calibrations)])))

    provenance = [("<tr>" + _cell(p.gpu, "text") + _cell(p.env, "text") + _cell(str(p.results))
                   + _cell("; ".join(p.gpu_names), "text") + _cell(", ".join(p.drivers), "text")
                   + _cell(", ".join(p.image_digests) or "none (local)", "text")
                   + _cell("; ".join(f"{name} {', '.join(versions)}" for name, versions in p.packages), "text")
                   + _cell(", ".join(p.pythons), "text") + _cell(", ".join(p.git_revs) or "unknown", "text")
                   + _cell(f"{p.first_started:%Y-%m-%d %H:%M}" if p.first_started else "—", "text")
                   + _cell(f"{p.last_ended:%Y-%m-%d %H:%M}" if p.last_ended else "—", "text") + "</tr>")
                  for p in report.provenance]
    sections.append(_section("Provenance", _table(
        "per env and GPU (several values: the runs differ); every number's own provenance is in its tooltip",
        ["gpu", "env", "results", "GPU name", "driver", "image digest", "packages", "python", "git rev",
         "first run (UTC)", "last run (UTC)"], provenance)))
    return sections


def write_html(report: Report, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = write_figures(report, out_dir)
    header = (f"<h1>mlcbench report</h1><p class=\"note\">{report.results} result(s) from {escape(report.source)}; "
              f"selection: {escape(report.selection.describe())}; generated "
              f"{report.generated_at:%Y-%m-%d %H:%M} UTC.</p>")
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlcbench report</title>"
            f"<style>{STYLE}</style></head><body>{header}{''.join(_sections(report, figures))}"
            f"<script>{IMAGES_CHECK}</script></body></html>")
    index = out_dir / "index.html"
    write_atomically(index, lambda path: path.write_text(page, encoding="utf-8"))
    return index
