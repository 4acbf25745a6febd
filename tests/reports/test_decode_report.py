"""Compile cost cold and warm, and where decode time goes, in the reports."""

import pytest

from mlcbench.orchestrator.reports.sections.costs import cost_rows
from mlcbench.orchestrator.reports.sections.decode import decode_lines
from mlcbench.orchestrator.store.provenance import finish
from mlcbench.schema import GPUS, MODELS, Calibration
from mlcbench.schema.results import ProcessTiming
from tests.reports.conftest import make_result


def llm_result(workflow, batch, tpot_ms=None, compile_s=None, compile_cache=None, gpu="h100", seed=0, step_ms=None):
    """step_ms: the per-step time of the timed calls (None: a result stored before it was recorded)."""
    result = make_result("tinyllama-1.1b", workflow, batch, gpu, "local", tokens_per_s=100.0, compile_s=compile_s,
                         seed=seed)
    latency = result.metrics.latency.model_copy(update={
        "step_median_ms": step_ms, "step_ci_low_ms": step_ms and step_ms * 0.98,
        "step_ci_high_ms": step_ms and step_ms * 1.02})
    return result.model_copy(update={"metrics": result.metrics.model_copy(
        update={"tpot_ms": tpot_ms, "compile_cache": compile_cache, "latency": latency})})


def test_cost_rows_give_the_median_compile_time_of_cold_and_of_warm_runs_apart():
    attempts = [llm_result("torch_compile_decode", 1, compile_s=100.0, compile_cache="cold"),
                llm_result("torch_compile_decode", 1, compile_s=12.0, compile_cache="warm"),
                llm_result("torch_compile_decode", 1, compile_s=14.0, compile_cache="warm"),
                llm_result("eager", 1, compile_s=1.0)]
    rows = {row.workflow: row for row in cost_rows(attempts[-2:], attempts=attempts)}
    assert (rows["torch_compile_decode"].compile_cold_s, rows["torch_compile_decode"].compile_warm_s) == (100.0, 13.0)
    assert (rows["eager"].compile_cold_s, rows["eager"].compile_warm_s) == (None, None)


def test_a_rerun_cell_shows_its_warm_result_and_the_cold_compile_of_its_first_attempt():
    cold = llm_result("torch_compile_decode", 1, compile_s=100.0, compile_cache="cold")
    warm = llm_result("torch_compile_decode", 1, compile_s=10.0, compile_cache="warm")
    assert cold.job_id == warm.job_id
    [row] = cost_rows([warm], attempts=[cold, warm])
    assert (row.compile_s_median, row.compile_cold_s, row.compile_warm_s) == (10.0, 100.0, 10.0)


def test_decode_line_sets_time_per_token_against_reading_weights_and_kv_cache_at_the_bandwidth():
    results = [llm_result("torch_compile_decode", 64, tpot_ms=4.5, step_ms=4.0),
               llm_result("torch_compile_decode", 1, tpot_ms=2.5, step_ms=2.0),
               llm_result("eager", 1, tpot_ms=20.0, step_ms=19.0), llm_result("eager", 1, step_ms=1.0, gpu="rtx4090")]
    lines = {(line.workflow, line.gpu): line for line in decode_lines(results)}
    line = lines[("torch_compile_decode", "h100")]
    assert [step.batch for step in line.steps] == [1, 64]
    info = MODELS["tinyllama-1.1b"]
    # 32 prompt + 32 new tokens: a decode step attends over 48 positions on average
    assert line.steps[0].step_bytes == info.decode_step_bytes("bf16", 1, 48)
    assert line.steps[1].step_bytes - line.steps[0].step_bytes == 2 * 22 * 4 * 64 * 48 * 63 * 2
    assert line.steps[0].bound_ms == pytest.approx(line.steps[0].step_bytes / 3350e9 * 1e3)
    text = line.describe()
    # the per-step time of the timed calls divides, the synchronised TPOT is shown as TPOT only
    assert "b1 2.00 ms [1.96–2.04] per step" in text and "3,350 GB/s" in text
    assert f"({100 * line.steps[0].bound_ms / 2.0:.1f} % of the bound); TPOT 2.50 ms" in text
    assert lines[("eager", "rtx4090")].bandwidth_gbs == 1008


def test_stored_bandwidth_fraction_counts_the_kv_cache_at_every_batch_size():
    result = finish(llm_result("torch_compile_decode", 64, tpot_ms=4.0), "local", "h100", None, None)
    step_bytes = MODELS["tinyllama-1.1b"].decode_step_bytes("bf16", 64, 48)
    assert result.metrics.bandwidth_fraction == pytest.approx(step_bytes / 4e-3 / 3350e9)


def test_one_sweep_shows_cold_and_warm_from_the_processes_of_a_cell():
    """A cell measured in two processes stores one result; the first process compiled cold, the second warm."""
    result = llm_result("torch_compile_static", 1, compile_s=30.0, compile_cache="cold")
    latency = result.metrics.latency
    processes = [ProcessTiming(samples_ms=[10.0], compile_s=30.0, compile_cache="cold"),
                 ProcessTiming(samples_ms=[10.0], compile_s=6.0, compile_cache="warm")]
    result = result.model_copy(update={"metrics": result.metrics.model_copy(
        update={"latency": latency.model_copy(update={"processes": processes})})})
    [row] = cost_rows([result])
    assert (row.compile_cold_s, row.compile_warm_s) == (30.0, 6.0)


def test_decode_line_uses_the_copy_bandwidth_measured_on_that_gpu_when_there_is_one():
    results = [llm_result("torch_compile_decode", 1, tpot_ms=2.0, step_ms=1.9)]
    measured = Calibration(device="cuda", copy_bytes=1 << 30, copy_gbs=3030.0, gemm_n=8192, gpu_tag="h100")
    [line] = decode_lines(results, [measured])
    assert line.bandwidth_gbs == 3030.0 and "measured" in line.describe() and "spec 3,350" in line.describe()
    assert line.steps[0].bound_ms == pytest.approx(line.steps[0].step_bytes / 3030e9 * 1e3)
    other_gpu = measured.model_copy(update={"gpu_tag": "h200"})
    assert decode_lines(results, [other_gpu])[0].bandwidth_gbs == 3350


def test_a_synthetic_result_on_a_gpu_gets_its_fraction_of_peak_and_no_decode_bound():
    """An FFN cell on a catalogued GPU has no decode step: stamping it must not ask for one (its attention dims are
    0)."""
    assert MODELS["ffn-tinyllama"].decode_step_bytes("bf16", 1, 48) is None
    result = finish(make_result("ffn-tinyllama", "torch_compile", 1, "h100", "local", tflops=100.0),
                    "local", "h100", None, None)
    assert result.metrics.peak_fraction == pytest.approx(100.0 / GPUS["h100"].peak_tflops("bf16", "fp32"))
    assert result.metrics.bandwidth_fraction is None


def test_a_cell_resumed_by_a_later_sweep_counts_each_process_once():
    """The resumed cell is stored again with the cold process it resumed from: that process is one cold compile."""
    def with_processes(*processes):
        result = llm_result("torch_compile_decode", 1, compile_s=120.0, compile_cache="cold")
        latency = result.metrics.latency.model_copy(update={"processes": list(processes)})
        return result.model_copy(update={"metrics": result.metrics.model_copy(update={"latency": latency})})

    cold = ProcessTiming(samples_ms=[10.0], compile_s=120.0, compile_cache="cold", sweep_id="first", round=1)
    warm = [ProcessTiming(samples_ms=[10.0], compile_s=seconds, compile_cache="warm", sweep_id="second", round=round_)
            for round_, seconds in ((1, 15.0), (2, 17.0))]
    first, resumed = with_processes(cold), with_processes(cold, *warm)
    [row] = cost_rows([resumed], attempts=[first, resumed])
    assert (row.compile_cold_s, row.compile_cold_n, row.compile_warm_s, row.compile_warm_n) == (120.0, 1, 16.0, 2)
    # a rerun in its own right (processes of its own) still adds its compiles
    rerun = with_processes(ProcessTiming(samples_ms=[10.0], compile_s=20.0, compile_cache="warm", sweep_id="third"))
    [row] = cost_rows([rerun], attempts=[first, resumed, rerun])
    assert (row.compile_cold_n, row.compile_warm_n) == (1, 3)
