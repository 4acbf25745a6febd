"""mlcbench's own kernels are a reference row of their own (handtuned_decode): never ranked with the compilers (P3,
"fastest"), exported under their own name with their options and what was applied, shown with their settings by
compare; results stored when they were torch_compile_decode options load and report under that row."""

import json

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.export import flat_row
from mlcbench.orchestrator.reports.sections.compare import compare, comparison_table
from mlcbench.orchestrator.reports.sections.p3 import p3_rows
from mlcbench.orchestrator.reports.sections.throughput import throughput_tables
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Applied, JobSpec, Result
from tests.reports.test_verdicts import cell

KERNELS = {"pdl": True, "triton_attention": True}


def handtuned(medians: list[float], gpu: str = "h100") -> Result:
    result = cell("llama2-7b", "torch_compile_decode", medians, gpu=gpu)
    job = JobSpec(**{**result.job.model_dump(), "workflow": "handtuned_decode", "options": KERNELS})
    applied = Applied(decode_loop="compiled_step", pdl=True, triton_gemv=False, triton_attention=True,
                      triton_gemm=False)
    return result.model_copy(update={"job": job, "job_id": job.job_id,
                                     "metrics": result.metrics.model_copy(update={"applied": applied})})


def cells(gpu: str = "h100") -> list[Result]:
    return [cell("llama2-7b", "eager", [60.0, 60.6, 59.4], gpu=gpu),
            cell("llama2-7b", "torch_compile_decode", [10.0, 10.1, 9.9], gpu=gpu), handtuned([5.0, 5.05, 4.95], gpu)]


def test_the_fastest_and_p3_never_count_the_hand_written_row():
    rows = perf_rows(cells())
    tables = {table.lines[-1].workflow: table for table in throughput_tables(rows)}
    # twice as fast as the compiled step, yet never the fastest of its table (its options make a table of its own)
    assert tables["handtuned_decode"].fastest[0].workflow is None
    assert "not judged: handtuned_decode (hand-written reference)" in tables["handtuned_decode"].fastest[0].text
    assert tables["torch_compile_decode"].fastest[0].workflow == "torch_compile_decode"
    assert [p3.workflow for p3 in p3_rows(rows)] == ["eager", "torch_compile_decode"]


def test_the_export_names_the_row_and_carries_its_options_and_what_it_applied():
    row = flat_row(handtuned([5.0, 5.05, 4.95]))
    assert row.workflow == "handtuned_decode" and row.hand_written
    assert json.loads(row.options) == KERNELS
    assert json.loads(row.applied) == {"decode_loop": "compiled_step", "pdl": True, "triton_gemv": False,
                                       "triton_attention": True, "triton_gemm": False}
    compiled = flat_row(cells()[1])
    assert not compiled.hand_written and json.loads(compiled.options) == {}


def test_compare_shows_a_row_s_settings():
    comparison = compare(perf_rows(cells("h100") + cells("h200")), "gpu", "h100", "h200")
    workflows = [row[1].text for row in comparison_table(comparison).rows]
    assert "handtuned_decode [pdl=True, triton_attention=True]" in workflows and "torch_compile_decode" in workflows


def test_a_result_stored_as_torch_compile_decode_with_a_kernel_reports_as_handtuned_decode(tmp_path):
    new = handtuned([5.0, 5.05, 4.95])
    # as main stored it before the row existed: the same job, named torch_compile_decode
    stored = new.model_copy(update={"job": new.job.model_copy(update={"workflow": "torch_compile_decode"})})
    assert '"workflow":"torch_compile_decode"' in stored.model_dump_json()
    store = Store(f"sqlite:///{tmp_path / 'old.db'}")
    store.put(stored)
    [read] = store.cells()
    assert read.job.workflow == "handtuned_decode" and read.job_id == read.job.job_id == new.job_id
    assert flat_row(read).workflow == "handtuned_decode"
    assert [p3.workflow for p3 in p3_rows(perf_rows([*cells()[:2], read]))] == ["eager", "torch_compile_decode"]


def test_every_export_format_carries_the_row_s_name_options_and_what_it_applied(tmp_path):
    import csv
    import io

    import pyarrow.parquet as pq

    from mlcbench.orchestrator.reports.export import to_csv, to_json, write_parquet

    results = [handtuned([5.0, 5.05, 4.95])]
    [from_csv] = csv.DictReader(io.StringIO(to_csv(results)))
    [from_json] = json.loads(to_json(results))
    write_parquet(results, tmp_path / "rows.parquet")
    [from_parquet] = pq.read_table(tmp_path / "rows.parquet").to_pylist()
    for row in (from_csv, from_json, from_parquet):
        assert row["workflow"] == "handtuned_decode" and str(row["hand_written"]) == "True"
        assert json.loads(row["options"]) == KERNELS and json.loads(row["applied"])["triton_attention"] is True


def test_the_decode_kernels_store_written_before_the_row_existed_reports_its_kernel_cells_under_it(tmp_path):
    import shutil
    import sqlite3
    from pathlib import Path

    committed = Path(__file__).parents[2] / "benchmarks" / "studies" / "decode-kernels" / "store.db"
    copy = tmp_path / "store.db"
    shutil.copyfile(committed, copy)
    stored = {json.loads(text)["job"]["workflow"] for (text,) in sqlite3.connect(copy).execute(
        "select result_json from results")}
    assert stored == {"torch_compile_decode"}  # as the sweep wrote them
    results = Store(f"sqlite:///{copy}").cells(status="ok")
    kernels = [r for r in results
               if any(getattr(r.job.options, name, None) for name in ("triton_gemv", "triton_attention"))]
    assert kernels and {r.job.workflow for r in kernels} == {"handtuned_decode"}
    assert all(r.job.job_id == r.job_id for r in results)  # their ids stay
    assert "handtuned_decode" not in [p3.workflow for p3 in p3_rows(perf_rows(results))]
    assert {flat_row(r).workflow for r in results} == {"torch_compile_decode", "handtuned_decode"}
