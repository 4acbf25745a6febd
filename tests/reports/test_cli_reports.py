"""The report, compare, export and merge commands against a fixture store."""

import csv
import io
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.store import Store
from mlcbench.schema import Calibration
from tests.reports.conftest import T0, TINYLLAMA_TOKENS, fixture_results, make_result, store_with

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def test_report_on_an_empty_store_says_so_in_one_line(tmp_path):
    Store(url(tmp_path / "empty.db"))
    result = run("report", "--db", url(tmp_path / "empty.db"), "--html", str(tmp_path / "html"))
    assert result.exit_code == 0
    assert result.output.strip().splitlines() == [f"the store {url(tmp_path / 'empty.db')} holds no results yet"]
    assert not (tmp_path / "html").exists()


@pytest.mark.parametrize("command", ["report", "export"])
def test_filters_that_match_nothing_say_so_in_one_line(store_path, command):
    result = run(command, "--db", url(store_path), "--gpu", "l4")
    assert result.exit_code == 0
    assert result.output.strip().splitlines() == [f"no stored results match gpu l4 in {url(store_path)}"]


def test_report_prints_speedups_and_failed_checks(store_path):
    result = run("report", "--db", url(store_path), "--gpu", "h100", "--env", "local")
    assert result.exit_code == 0
    # tinyllama torch_compile_static b1 on h100/local: 250 / 50, with both intervals
    assert re.search(r"250\.0 \[24\d\.\d–25\d\.\d\] \(5\.00× \[4\.9\d–5\.0\d\]\)", result.output)
    # b4 failed its check: its figure is shown, with no speedup
    assert re.search(r"700\.0 \[69\d\.\d–70\d\.\d\] ✗ check FAILED: no speedup", result.output)
    # the section every writer shows under one heading (it says so too where no check failed)
    assert "Correctness checks that failed" in result.output
    assert "1 result(s) differ from eager beyond tolerance" in result.output
    assert "rtx4090" not in result.output


def test_html_report_writes_every_figure_and_references_only_local_files(store_path, tmp_path):
    out = tmp_path / "html"
    result = run("report", "--db", url(store_path), "--html", str(out))
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    sources = re.findall(r'<img src="([^"]+)"', page)
    expected = {"llm-tinyllama-1-1b-h100.png", "llm-tinyllama-1-1b-rtx4090.png", "llm-llama2-7b-h100.png",
                "llm-llama2-7b-rtx4090.png", "synthetic-ffn-tinyllama-h100.png",
                "compare-gpu-h100-vs-rtx4090.png", "compare-env-local-vs-triton-2504.png",
                "generations-h100-vs-rtx4090.png"}
    assert set(sources) == expected
    for name in expected:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
    assert {p.name for p in out.iterdir()} == expected | {"index.html"}
    assert not re.search(r'(src|href)="(https?:)?//', page)
    # support matrix: the reason on hover and in the footnotes
    assert 'title="b64 fp16 oom: CUDA out of memory"' in page
    assert "<li>b1 fp16 failed: RuntimeError: inductor lowering</li>" in page
    # provenance per env/GPU and in each number's title
    assert "sha256:" + "ab" * 32 in page and "torch 2.7.0a0" in page and "driver 580.1" in page
    # the failed correctness check is shown, and marked in the throughput table
    assert "1 result(s) differ from eager beyond tolerance" in page
    assert '<td class="fail"' in page
    assert "<h3>Rubric</h3>" in page


def test_markdown_tables_hold_tokens_per_s_and_speedup(store_path, tmp_path):
    result = run("report", "--db", url(store_path), "--gpu", "rtx4090", "--markdown", "-")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "| workflow | batch 1 | batch 4 |" in lines
    # the throughput row (the P3 summary has one per workflow too)
    [static] = [line for line in lines if line.startswith("| torch_compile_static |") and "[" in line]
    assert re.fullmatch(r"\| torch_compile_static \| 100\.0 \[.*?\] \(2\.50× \[.*?\]\), 20\.0 % spec bound \| "
                        r"420\.0 \[.*?\] \(3\.50× \[.*?\]\), 20\.0 % spec bound \|", static)
    assert any(line.startswith("| eager | 30.0 [") and line.endswith(" | oom |") for line in lines)  # said, not blank
    # compile cost, what did not run and why, and where the numbers come from
    assert any(line.startswith("| tinyllama-1.1b | torch_compile_static | defaults | bf16 | 4 | rtx4090 | local |")
               for line in lines)
    assert "| eager | local on rtx4090 | oom: CUDA out of memory | llama2-7b |" in lines
    assert "| torch_compile | local on rtx4090 | failed: RuntimeError: inductor lowering | llama2-7b |" in lines
    provenance = [line for line in lines if line.startswith("| rtx4090 | local |")]
    assert len(provenance) == 1 and "NVIDIA GeForce RTX 4090" in provenance[0] and "torch 2.11.0" in provenance[0]


def test_compare_two_gpus_prints_both_figures_and_the_ratio(store_path):
    result = run("compare", "--db", url(store_path), "--gpu", "h100", "--gpu", "rtx4090", "--env", "local")
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.output.splitlines()
            if line.startswith("│")]
    labels = {tuple(row[:7]): row[7] for row in rows}
    # the h100 side failed its check: both figures shown, no ratio
    assert labels[("tinyllama-1.1b", "torch_compile_static", "4", "local", "tok/s", "700.00", "420.00")] == (
        "— (check failed: no ratio)")
    assert labels[("tinyllama-1.1b", "torch_compile_static", "1", "local", "tok/s", "250.00", "100.00")].startswith(
        "0.40× [0.")
    assert labels[("llama2-7b", "eager", "64", "local", "tok/s", "not run", "oom")] == "—"
    assert "ran ok on both sides" in result.output


def test_compare_needs_two_gpus_or_two_envs(store_path):
    result = runner.invoke(app, ["compare", "--db", url(store_path), "--gpu", "h100"])
    assert result.exit_code == 2
    assert "compare needs exactly two --gpu values" in result.output


def test_export_csv_round_trip(store_path, tmp_path):
    out = tmp_path / "rows.csv"
    result = run("export", "--format", "csv", "--out", str(out), "--db", url(store_path))
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == len(fixture_results())
    [row] = [r for r in rows if (r["gpu"], r["env"], r["model"], r["workflow"], r["batch"])
             == ("rtx4090", "local", "tinyllama-1.1b", "torch_compile_static", "4")]
    assert float(row["tokens_per_s"]) == TINYLLAMA_TOKENS[("rtx4090", "local", "torch_compile_static", 4)]
    assert (row["status"], row["correct"], row["torch"], row["driver"], row["gpu_name"]) == (
        "ok", "True", "2.11.0", "575.2", "NVIDIA GeForce RTX 4090")
    assert row["started_at"] == (T0 - timedelta(minutes=1)).isoformat()
    [oom] = [r for r in rows if r["status"] == "oom"]
    assert (oom["reason"], oom["tokens_per_s"]) == ("CUDA out of memory", "")


def test_export_filters_and_json_carries_the_full_result(store_path):
    result = run("export", "--format", "json", "--db", url(store_path), "--status", "failed,unsupported")
    assert result.exit_code == 0
    rows = json.loads(result.output)
    assert sorted(r["status"] for r in rows) == ["failed", "unsupported"]
    assert all(r["result"]["provenance"]["gpu"]["driver"] == "575.2" for r in rows)


def test_export_parquet_round_trip(store_path, tmp_path):
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "rows.parquet"
    assert run("export", "--format", "parquet", "--out", str(out), "--db", url(store_path)).exit_code == 0
    table = pyarrow_parquet.read_table(out)
    assert table.num_rows == len(fixture_results())
    assert sorted(v for v in table.column("tflops").to_pylist() if v is not None) == [100.0, 150.0, 400.0, 600.0]


def test_export_refuses_an_unknown_format(store_path):
    result = runner.invoke(app, ["export", "--format", "xlsx", "--db", url(store_path)])
    assert result.exit_code == 2 and "unknown --format 'xlsx'" in result.output


def test_merge_adds_nothing_twice_and_a_crash_never_hides_another_hosts_ok(store_path, tmp_path):
    target = tmp_path / "merged.db"
    first = run("merge", str(store_path), "--into", str(target))
    assert first.exit_code == 0
    total = len(fixture_results())
    assert f"{total} attempt(s) added, 0 already there; {total} new cell(s), 0 cell(s) with another" in first.output
    again = run("merge", str(store_path), str(store_path), "--into", str(target))
    assert f"0 attempt(s) added, {2 * total} already there; 0 new cell(s), 0 cell(s)" in again.output
    assert len(Store(url(target)).rows()) == total

    newer = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=99.0,
                        ended=T0 + timedelta(days=1))
    crash = make_result("tinyllama-1.1b", "eager", 4, "h100", "local", status="crashed", reason="worker died",
                        ended=T0 + timedelta(days=1))
    other = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=5.0, seed=7)
    store_with(tmp_path / "second.db", [newer, crash, other])
    merged = run("merge", str(tmp_path / "second.db"), "--into", str(target))
    assert "3 attempt(s) added, 0 already there; 1 new cell(s), 1 cell(s) with another result now" in merged.output
    store = Store(url(target))
    cells = {(r.job.batch_size, r.job_id): r for r in
             store.cells(gpu_tag="h100", env="local", model="tinyllama-1.1b", workflow="eager")}
    assert len(cells) == 3
    assert cells[(1, newer.job_id)] == newer  # the newer ok
    assert cells[(4, crash.job_id)].metrics.tokens_per_s == 200.0  # the crash is history only
    assert cells[(1, other.job_id)] == other
    assert crash in store.history(status="crashed")


def test_merge_refuses_a_missing_source(tmp_path):
    result = runner.invoke(app, ["merge", str(tmp_path / "nope.db"), "--into", str(tmp_path / "c.db")])
    assert result.exit_code == 2 and "no such store file" in result.output


def test_merge_copies_each_sources_measured_gpu_ceilings_once(tmp_path):
    calibration = Calibration(device="cuda", copy_bytes=1 << 30, copy_gbs=2980.0, gemm_n=8192,
                              gemm_tflops={"bf16": 790.0}, gpu_tag="h100", env="local", sweep_id="s1")
    source = tmp_path / "source.db"
    store_with(source, [make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=1.0)])
    Store(url(source)).put_calibration(calibration)
    target = tmp_path / "merged.db"
    for _ in range(2):
        assert run("merge", str(source), "--into", str(target)).exit_code == 0
        assert Store(url(target)).calibrations() == [calibration]
