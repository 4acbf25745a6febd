"""Rich tables of a report for the terminal."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from mlcbench.orchestrator.reports import fmt
from mlcbench.orchestrator.reports.crossgen import GenerationRow
from mlcbench.orchestrator.reports.data import (RULES, Comparison, PerfRow, SupportMatrix, ThroughputTable,
                                                ceiling_rows)
from mlcbench.orchestrator.reports.p3 import RUBRIC
from mlcbench.orchestrator.reports.report import Report
from mlcbench.orchestrator.reports.tables import STATUS_STYLE


def _perf_cell(row: PerfRow | None) -> Text:
    if row is None:
        return Text("")
    if row.value is None:
        return Text(row.status, style=STATUS_STYLE.get(row.status, ""))
    text = fmt.perf(row)
    if fmt.bounds(row):
        text += f" {fmt.bounds(row)}"
    style = "red" if row.check_failed else "yellow" if row.flags() else ""
    return Text(text, style=style)


def throughput_table(table: ThroughputTable) -> Group:
    efficiency = "decode bandwidth bound (per-step time of the timed calls)" if table.kind == "llm" else "peak"
    bounds = any(fmt.bounds(row) for line in table.lines for row in line.cells.values())
    rich_table = Table(title=f"{table.title} (value [95 % interval], the processes it combines, speedup over eager"
                             + (f", % of {efficiency}: spec / measured" if bounds else "")
                             + "; ⚠ flags a figure not to trust)")
    rich_table.add_column("workflow")
    for batch in table.batches:
        rich_table.add_column(f"b{batch}", justify="right")
    for line in table.lines:
        rich_table.add_row(line.workflow, *(_perf_cell(line.cells.get(b)) for b in table.batches))
    return Group(rich_table, *(Text(f"  {verdict.text}") for verdict in table.fastest))


def support_table(matrix: SupportMatrix) -> Table:
    table = Table(title=f"{matrix.model}: support")
    table.add_column("workflow")
    for env, gpu in matrix.columns:
        table.add_column(f"{env} @ {gpu}")
    for workflow in matrix.workflows:
        cells = []
        for env, gpu in matrix.columns:
            cell = matrix.cell(workflow, env, gpu)
            cells.append(Text("not run") if cell is None else Text(cell.label, style=STATUS_STYLE.get(cell.status, "")))
        table.add_row(workflow, *cells)
    return table


def comparison_table(comparison: Comparison) -> Table:
    table = Table(title=comparison.title)
    for name, justify in [("model", "left"), ("workflow", "left"), ("batch", "right"),
                          ("env" if comparison.axis == "gpu" else "gpu", "left"), ("unit", "left"),
                          (comparison.first, "right"), (comparison.second, "right"),
                          ("ratio [95 % interval]", "right"), ("flags", "left")]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in comparison.rows:
        table.add_row(row.model, row.workflow, str(row.batch), row.fixed, row.unit,
                      fmt.number(row.first, 2) if row.first is not None else row.first_status or "not run",
                      fmt.number(row.second, 2) if row.second is not None else row.second_status or "not run",
                      row.label(), Text(", ".join(row.flags), style="yellow"))
    return table


def generation_table(rows: list[GenerationRow], first: str, second: str) -> Table:
    table = Table(title=f"{second} / {first} per workflow: the gain against the ratios of bandwidth and of peak")
    for name, justify in [("kind", "left"), ("workflow", "left"), ("batch", "right"), ("cells", "right"),
                          ("gain", "right"), ("bandwidth ratio", "right"), ("peak ratio", "right"),
                          ("what bounds it", "left")]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(row.kind, row.workflow, str(row.batch), str(row.cells), row.gain(),
                      fmt.ratio(row.expected.bandwidth), fmt.ratio(row.expected.peak), row.verdict)
    return table


def report_renderables(report: Report) -> list[RenderableType]:
    parts: list[RenderableType] = [Text(f"{report.results} result(s) from {report.source}; selection: "
                                        f"{report.selection.describe()}")]
    parts += [support_table(matrix) for matrix in report.support]
    parts += [throughput_table(table) for table in report.tables]
    if report.tables:
        parts.append(Text(RULES, style="dim"))

    costs = Table(title="compile time and peak memory (runs that ended ok)")
    for name in ("model", "workflow", "gpu", "env", "compile s median", "compile s max", "cold / warm s (processes)",
                 "load s", "peak memory"):
        costs.add_column(name)
    for c in report.costs:
        costs.add_row(c.model, c.workflow, c.gpu, c.env, fmt.number(c.compile_s_median), fmt.number(c.compile_s_max),
                      fmt.cold_warm(c.compile_cold_s, c.compile_cold_n, c.compile_warm_s, c.compile_warm_n),
                      fmt.number(c.load_s_median),
                      fmt.gigabytes(c.peak_mem_bytes))
    parts.append(costs)
    if report.spread:
        spread = Table(title="between-process spread of the synthetic cells (max / min of the process medians)")
        for name in fmt.SPREAD_HEADER:
            spread.add_column(name)
        for row in report.spread:
            spread.add_row(*fmt.spread(row))
        parts.append(spread)
    if report.decode:
        parts.append(Group(Text("where decode time goes (per-step time of the timed calls against the memory bound)",
                                style="bold"), *(Text(f"  {line.describe()}") for line in report.decode)))

    if report.failed_checks:
        checks = Table(title="correctness checks that FAILED", style="red")
        for name in ("model", "workflow", "gpu", "env", "batch", "cosine", "rel L2", "token agreement", "tolerance",
                     "checked how, failed where"):
            checks.add_column(name)
        for c in report.failed_checks:
            checks.add_row(c.model, c.workflow, c.gpu, c.env, str(c.batch), fmt.number(c.cosine, 5),
                           fmt.number(c.rel_l2_error, 4), fmt.percent(c.token_agreement), fmt.number(c.tolerance, 3),
                           c.where)
        parts.append(checks)

    p3 = Table(title="P3 summary (1 worst .. 5 best)")
    for name in ("workflow", "performance", "productivity", "portability", "input flexibility", "architecture",
                 "failed checks"):
        p3.add_column(name)
    for p in report.p3:
        p3.add_row(p.workflow, f"{p.performance or '—'} ({fmt.p3_speedups(p)})",
                   f"{p.productivity or '—'} ({fmt.number(p.median_compile_s)} s"
                   + (", own decode loop" if p.custom_decode_loop else "") + ")",
                   f"{p.portability} ({p.cells_ran}/{p.cells_tried})",
                   f"{p.input_flexibility} ({p.batches_ran}/{p.batches_tried}"
                   + (", dynamic" if p.dynamic_shapes else "") + ")",
                   f"{p.architecture} ({', '.join(p.gpus_ran) or 'none'})", f"{p.checks_failed}/{p.checks}")
    parts.append(p3)
    parts.append(Group(*(Text(f"  {name}: {text}", style="dim") for name, text in RUBRIC)))

    if report.calibrations:
        ceilings = Table(title="the GPU's ceilings, measured once per GPU per sweep (spec from the catalog)")
        for name in ("gpu", "env", "sweep", "device-to-device copy (read + written)", "matmul"):
            ceilings.add_column(name, overflow="fold")
        for c in ceiling_rows(report.calibrations):
            ceilings.add_row(c.gpu, c.env, c.sweep, *fmt.ceiling(c))
        parts.append(ceilings)

    provenance = Table(title="provenance")
    for name in ("gpu", "env", "results", "GPU", "driver", "image", "torch", "transformers", "git rev", "runs (UTC)"):
        provenance.add_column(name, overflow="fold")
    for p in report.provenance:
        versions = dict(p.packages)
        provenance.add_row(
            p.gpu, p.env, str(p.results), "; ".join(p.gpu_names), ", ".join(p.drivers),
            ", ".join(d[:19] for d in p.image_digests) or "none", ", ".join(versions.get("torch", ())),
            ", ".join(versions.get("transformers", ())), ", ".join(p.git_revs) or "unknown",
            (f"{p.first_started:%Y-%m-%d %H:%M} .. {p.last_ended:%Y-%m-%d %H:%M}"
             if p.first_started and p.last_ended else "—"))
    parts.append(provenance)
    return parts
