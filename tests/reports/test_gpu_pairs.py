"""Pairs on one GPU: a speedup, "fastest" and P3 pair a cell with eager on its own physical GPU (UUID and host) where
eager ran there; a pairing that must cross GPUs says so in every output. A store of a sweep over two H100s (two UUIDs
under one GPU tag)."""

from datetime import timedelta

import pytest

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.loading import load_attempts, load_results
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.sections.compare import compare
from mlcbench.orchestrator.reports.sections.p3 import p3_rows
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.schema import GpuInfo, Result
from tests.reports.conftest import GPU_INFO, T0, make_result, store_with

GPU_A, GPU_B = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def on(result: Result, uuid: str, sweep: str, hours: int = 0) -> Result:
    gpu = GpuInfo(**{**GPU_INFO["h100"].model_dump(), "uuid": uuid})
    ended = T0 + timedelta(hours=hours)
    provenance = result.provenance.model_copy(update={"gpu": gpu, "hostname": "node1", "sweep_id": sweep,
                                                      "started_at": ended - timedelta(minutes=1), "ended_at": ended})
    return result.model_copy(update={"provenance": provenance})


def two_gpu_store(tmp_path):
    def llm(workflow, batch, tokens, env="local"):
        return make_result("tinyllama-1.1b", workflow, batch, "h100", env, tokens_per_s=tokens,
                           passed=None if workflow == "eager" else True, compile_s=30.0)

    attempts = [
        # b1: eager ran on both GPUs (on B in an earlier sweep); the cell's latest eager result is A's
        on(llm("eager", 1, 60.0), GPU_B, "s0"),
        on(llm("eager", 1, 50.0), GPU_A, "s1", hours=1),
        on(llm("torch_compile_static", 1, 120.0), GPU_B, "s1", hours=1),
        # b4: eager on A only, the compiled cell on B
        on(llm("eager", 4, 200.0), GPU_A, "s1", hours=1),
        on(llm("torch_compile_static", 4, 700.0), GPU_B, "s1", hours=1),
        # the same eager cell in another env, on the other GPU
        on(llm("eager", 1, 55.0, env="triton-2504"), GPU_B, "s1", hours=1),
    ]
    return store_with(tmp_path / "two-gpus.db", attempts)


def test_a_speedup_pairs_with_eager_on_its_own_gpu_where_it_ran_there_and_names_a_pair_across_gpus(tmp_path):
    store = two_gpu_store(tmp_path)
    selection = Selection()
    results, attempts = load_results(store, selection), load_attempts(store, selection)
    rows = {(row.workflow, row.batch, row.env): row for row in perf_rows(results, attempts=attempts)}
    b1, b4 = rows[("torch_compile_static", 1, "local")].speedup, rows[("torch_compile_static", 4, "local")].speedup
    # b1: eager on B (60 tok/s, sweep s0), not the cell's latest eager result on A (50 tok/s)
    assert b1.value == pytest.approx(120.0 / 60.0) and b1.across_gpus is None and "sweep s0" in b1.label()
    # b4: only A's eager: the pair crosses GPUs, and says so
    assert b4.value == pytest.approx(700.0 / 200.0) and "across GPUs: GPU-aaaaaaa" in b4.label() and "GPU-bbbbbbb" in b4.label()
    # without the attempts, b1 must cross GPUs too: labelled, never silently
    alone = {(row.workflow, row.batch, row.env): row for row in perf_rows(results)}
    assert alone[("torch_compile_static", 1, "local")].speedup.value == pytest.approx(120.0 / 50.0)
    assert "across GPUs" in alone[("torch_compile_static", 1, "local")].speedup.label()
    # P3 counts the pair that crossed
    [eager, compiled] = p3_rows(rows.values())
    assert compiled.speedups_across_gpus == 1 and eager.speedups_across_gpus == 0


def test_every_report_output_labels_a_pairing_across_gpus(tmp_path):
    store = two_gpu_store(tmp_path)
    selection = Selection()
    report = build_report(load_results(store, selection), "two-gpus.db", selection,
                          attempts=load_attempts(store, selection))
    text = markdown(report)
    [b4_fastest] = [line for table in report.tables for line in table.fastest if line.batch == 4
                    and table.env == "local"]
    assert b4_fastest.workflow == "torch_compile_static" and "across GPUs" in b4_fastest.text
    assert b4_fastest.text in text
    assert "1 against eager on another GPU" in text  # the P3 summary
    # the env comparison of the eager b1 cell: local on A, triton-2504 on B
    comparison = compare(report.perf, "env", "local", "triton-2504")
    [row] = [row for row in comparison.rows if row.batch == 1 and row.workflow == "eager"]
    assert "across GPUs" in row.label()
