"""Derived tables: speedups, support matrix, correctness, comparisons, costs, provenance and P3 scores."""

import pytest

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.sections.checks import failed_checks
from mlcbench.orchestrator.reports.sections.compare import compare, comparisons_in
from mlcbench.orchestrator.reports.sections.costs import cost_rows
from mlcbench.orchestrator.reports.sections.p3 import p3_rows
from mlcbench.orchestrator.reports.sections.provenance import provenance_rows
from mlcbench.orchestrator.reports.sections.support import support_matrices
from mlcbench.orchestrator.reports.sections.throughput import throughput_tables
from mlcbench.schema import Applied, JobSpec
from tests.reports.conftest import FAILED_CHECK, FFN_TFLOPS, TINYLLAMA_TOKENS, make_result


def _row(rows, gpu, env, model, workflow, batch):
    [row] = [r for r in rows if (r.gpu, r.env, r.model, r.workflow, r.batch) == (gpu, env, model, workflow, batch)]
    return row


def test_speedup_is_compiled_over_eager_of_the_same_model_batch_env_and_gpu(results):
    rows = perf_rows(results)
    for (gpu, env, workflow, batch), tokens in TINYLLAMA_TOKENS.items():
        row = _row(rows, gpu, env, "tinyllama-1.1b", workflow, batch)
        assert row.value == tokens
        # a result that failed its check gets no speedup
        assert (row.speedup is None) == (workflow == "eager" or (gpu, env, workflow, batch) == FAILED_CHECK)
        if row.speedup is not None:
            assert row.speedup.value == pytest.approx(tokens / TINYLLAMA_TOKENS[(gpu, env, "eager", batch)])
            assert row.speedup.significant and row.speedup.baseline_sweep is None
    ffn = _row(rows, "h100", "local", "ffn-tinyllama", "torch_compile", 64)
    assert ffn.unit == "TFLOPS"
    assert ffn.speedup.value == pytest.approx(FFN_TFLOPS[("torch_compile", 64)] / FFN_TFLOPS[("eager", 64)])
    # H100 bf16 peak is 989 TFLOPS; the fraction is derived from the catalog when the result does not carry it
    assert ffn.efficiency == pytest.approx(600 / 989)


def test_results_that_did_not_run_or_have_no_eager_reference_get_no_speedup(results):
    rows = perf_rows(results)
    failed = _row(rows, "rtx4090", "local", "llama2-7b", "torch_compile", 1)
    assert (failed.status, failed.value, failed.speedup) == ("failed", None, None)
    no_eager = _row(rows, "h100", "triton-2504", "llama2-7b", "torch_tensorrt", 1)
    assert no_eager.value == 60.0 and no_eager.speedup is None


def test_throughput_tables_are_workflow_by_batch_per_model_gpu_and_env(results):
    tables = throughput_tables(perf_rows(results))
    [table] = [t for t in tables if (t.model, t.gpu, t.env) == ("tinyllama-1.1b", "rtx4090", "local")]
    assert table.batches == (1, 4)
    assert [line.workflow for line in table.lines] == ["eager", "torch_compile_static"]
    assert table.lines[1].cells[4].value == 420.0
    assert {t.kind for t in tables} == {"llm", "synthetic"}


def test_support_matrix_keeps_every_status_and_reason(results):
    [llama] = [m for m in support_matrices(results) if m.model == "llama2-7b"]
    assert llama.columns == (("local", "rtx4090"), ("triton-2504", "h100"))
    eager = llama.cell("eager", "local", "rtx4090")
    assert eager.status == "oom" and eager.counts == (("oom", 1), ("ok", 1))
    assert eager.label == "oom 1/2 · ok 1/2"
    assert eager.reasons == ("b64 fp16 oom: CUDA out of memory",)
    assert llama.cell("torch_tensorrt", "local", "rtx4090").status == "unsupported"
    assert llama.cell("torch_compile", "local", "rtx4090").reasons == ("b1 fp16 failed: RuntimeError: inductor lowering",)
    assert llama.cell("torch_tensorrt", "triton-2504", "h100").label == "ok"
    assert llama.cell("eager", "triton-2504", "h100") is None


def test_failed_correctness_checks_are_listed(results):
    [check] = failed_checks(results)
    assert (check.gpu, check.env, check.workflow, check.batch) == FAILED_CHECK
    assert check.token_agreement == 0.25
    assert _row(perf_rows(results), *FAILED_CHECK[:2], "tinyllama-1.1b", *FAILED_CHECK[2:]).correct is False


def test_compare_gpus_gives_second_over_first_per_workflow_model_and_batch(results):
    comparison = compare(perf_rows(results), "gpu", "h100", "rtx4090")
    by_key = {(r.workflow, r.model, r.batch, r.fixed): r for r in comparison.rows}
    row = by_key[("torch_compile_static", "tinyllama-1.1b", 1, "local")]
    assert (row.first, row.second) == (250.0, 100.0)
    assert row.ratio == pytest.approx(100 / 250) and row.verdict
    # the h100 side of b4 failed its check: both figures, no ratio, no verdict
    failed = by_key[("torch_compile_static", "tinyllama-1.1b", 4, "local")]
    assert (failed.first, failed.second, failed.ratio, failed.verdict) == (700.0, 420.0, None, False)
    # measured on one side only: shown, with no ratio
    assert by_key[("torch_tensorrt", "llama2-7b", 1, "triton-2504")].ratio is None
    assert by_key[("eager", "llama2-7b", 64, "local")].second_status == "oom"


def test_compare_envs_on_one_gpu(results):
    rows = [r for r in perf_rows(results) if r.gpu == "h100"]
    comparison = compare(rows, "env", "local", "triton-2504")
    row = next(r for r in comparison.rows if (r.workflow, r.model, r.batch) == ("eager", "tinyllama-1.1b", 1))
    assert row.fixed == "h100" and row.ratio == pytest.approx(45 / 50)


def test_report_compares_every_other_gpu_and_env_with_the_first(results):
    comparisons = comparisons_in(perf_rows(results))
    assert [(c.axis, c.first, c.second) for c in comparisons] == [("gpu", "h100", "rtx4090"),
                                                                   ("env", "local", "triton-2504")]
    one_gpu_one_env = [r for r in perf_rows(results) if (r.gpu, r.env) == ("h100", "local")]
    assert comparisons_in(one_gpu_one_env) == []


def test_cost_rows_summarise_compile_time_and_peak_memory_per_cell(results):
    rows = [c for c in cost_rows(results) if (c.model, c.workflow, c.gpu, c.env)
            == ("ffn-tinyllama", "torch_compile", "h100", "local")]
    assert [(row.batch, row.compile_s_median, row.peak_mem_bytes) for row in rows] == [
        (1, 20.0, 2_000_000_000), (64, 20.0, 128_000_000_000)]


def test_two_option_variants_of_a_workflow_are_two_cost_rows_and_two_p3_rows():
    """Two programs: one compiling in about 2 s, the other in about 45 s; a median over both would be neither's."""
    def variant(options, compile_s, seed):
        result = make_result("tinyllama-1.1b", "torch_compile_decode", 1, "h100", "local", tokens_per_s=100.0,
                             compile_s=compile_s, passed=True, seed=seed)
        job = JobSpec(**{**result.job.model_dump(), "options": options})
        return result.model_copy(update={"job": job})

    plain = [variant({}, seconds, seed) for seed, seconds in enumerate((1.2, 2.1))]
    gemv = [variant({"pdl": True}, seconds, seed) for seed, seconds in enumerate((44.0, 45.0))]
    rows = cost_rows([*plain, *gemv])
    # one row per cell (two seeds each: two cells per variant), each variant's own compile
    assert sorted((row.options, row.compile_s_median) for row in rows) == [
        ("", 1.2), ("", 2.1), ("pdl=True", 44.0), ("pdl=True", 45.0)]
    scores = {row.options: row for row in p3_rows(perf_rows([*plain, *gemv]))}
    assert scores[""].median_compile_s == 1.65 and scores[""].productivity == 5
    assert scores["pdl=True"].median_compile_s == 44.5 and scores["pdl=True"].productivity == 4


def test_provenance_rows_per_env_and_gpu(results):
    rows = {(p.gpu, p.env): p for p in provenance_rows(results)}
    assert set(rows) == {("h100", "local"), ("h100", "triton-2504"), ("rtx4090", "local")}
    triton = rows[("h100", "triton-2504")]
    assert triton.image_digests == ("sha256:" + "ab" * 32,)
    assert dict(triton.packages)["torch"] == ("2.7.0a0",)
    assert triton.drivers == ("580.1",) and triton.git_revs == ("abc123",)
    assert rows[("rtx4090", "local")].image_digests == ()


def test_p3_scores_follow_the_rubric(results):
    scores = {p.workflow: p for p in p3_rows(perf_rows(results))}
    static = scores["torch_compile_static"]
    # speedups 5.0, 3.5, 2.5, 3.5, 4.0, 3.0 -> median 3.5 -> performance 5
    assert static.median_speedup == pytest.approx(3.5) and static.performance == 5
    assert static.median_compile_s == 30.0 and static.productivity == 4
    assert (static.checks_failed, static.checks) == (1, 6)
    eager = scores["eager"]
    assert eager.performance == 2
    # eager: tinyllama in 3 cells, llama2-7b on rtx4090 ran at b1 (oom at b64), ffn on h100: every cell ran
    assert (eager.cells_ran, eager.cells_tried, eager.portability) == (5, 5, 5)
    assert (eager.batches_ran, eager.batches_tried) == (9, 10)
    assert eager.gpus_ran == ("h100", "rtx4090") and eager.architecture == 5
    failed = scores["torch_compile"]  # llama2-7b failed on rtx4090; ffn ran on h100
    assert (failed.cells_ran, failed.cells_tried, failed.portability) == (1, 2, 3)
    assert failed.gpus_ran == ("h100",) and failed.architecture == 3
    trt = scores["torch_tensorrt"]  # 400 s compile (-> 2) and its own decode loop (-1)
    assert trt.custom_decode_loop and trt.productivity == 1
    assert trt.performance is None


def test_p3_input_flexibility_counts_dynamic_shapes():
    dynamic = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=1.0)
    applied = Applied(kv_cache="dynamic", dynamic_shapes=True)
    dynamic = dynamic.model_copy(update={"metrics": dynamic.metrics.model_copy(update={"applied": applied})})
    static = make_result("tinyllama-1.1b", "torch_compile_static", 1, "h100", "local", tokens_per_s=2.0)
    scores = {p.workflow: p for p in p3_rows(perf_rows([dynamic, static]))}
    assert scores["eager"].dynamic_shapes and scores["eager"].input_flexibility == 5
    assert not scores["torch_compile_static"].dynamic_shapes and scores["torch_compile_static"].input_flexibility == 4
