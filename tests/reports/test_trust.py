"""Reports never present noise as a finding: intervals, flags, "not significant", "not compiled", one cell per
settings, the baseline of the same sweep, and the GPU's measured ceilings."""

from datetime import timedelta

import pytest

from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.sections.throughput import throughput_tables
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.schema import Calibration
from tests.reports.conftest import T0, latency, make_result


def _with(result, **update):
    return result.model_copy(update=update)


def _timed(result, processes: list[list[float]]):
    """The result timed by these processes (its figure kept: a speedup and a flag read the times)."""
    return _with(result, metrics=result.metrics.model_copy(update={"latency": latency(processes)}))


def _pair(eager_processes, compiled_processes, **compiled_fields):
    eager = _timed(make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0), eager_processes)
    compiled = _timed(make_result("ffn-tinyllama", "torch_compile", 1, "h100", "local", tflops=100.0,
                                  **compiled_fields), compiled_processes)
    return eager, compiled


def _row(rows, workflow):
    [row] = [r for r in rows if r.workflow == workflow]
    return row


def test_an_outlier_call_inside_one_process_moves_neither_the_figure_nor_a_flag():
    """The interval comes from the process medians: one slow call in one process singles out nothing (this used to
    flag the cell by its call CV, as every sub-millisecond cell was)."""
    steady = [[1.0, 1.01, 0.99, 1.0]] * 3
    eager, compiled = _pair([[1.0, 1.01, 0.99, 45.0], *steady[1:]], steady)
    rows = perf_rows([eager, compiled])
    assert _row(rows, "eager").flags() == []
    speedup = _row(rows, "torch_compile").speedup
    # the steady process medians leave the interval narrow: not just "not significant" but the same within 1 %
    assert speedup.significant is False and speedup.label().startswith("≈ [")
    assert speedup.ratio.equal_within < 0.01 and "(equal within 0." in speedup.label()
    text = markdown(build_report([eager, compiled], "test", Selection()))
    assert "(equal within 0." in text and "⚠ interval" not in text
    assert "×" not in text.split("(equal within")[0][-18:]


def test_one_process_far_from_the_others_widens_the_interval_flags_it_and_makes_the_speedup_not_significant():
    eager, compiled = _pair([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]], [[0.9, 0.9]] * 3)
    rows = perf_rows([eager, compiled])
    assert _row(rows, "eager").flags() == ["interval −63/+170 %"]
    assert _row(rows, "torch_compile").speedup.label() == "≈ (not significant)"


def test_a_real_speedup_shows_its_interval():
    eager, compiled = _pair([[2.0, 2.01], [2.02, 2.0], [1.99, 2.0]], [[1.0, 1.01], [1.0, 0.99], [1.01, 1.0]])
    speedup = _row(perf_rows([eager, compiled]), "torch_compile").speedup
    assert speedup.significant and speedup.ratio.low < 2.0 < speedup.ratio.high
    assert speedup.label().startswith("2.00× [")


def test_a_workflow_that_compiled_nothing_gets_no_speedup():
    eager = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=50.0)
    compiled = make_result("tinyllama-1.1b", "torch_compile", 1, "h100", "local", tokens_per_s=80.0)
    nothing = _with(compiled, metrics=compiled.metrics.model_copy(update={
        "applied": compiled.metrics.applied.model_copy(update={"compiled_graphs": 0})}))
    row = _row(perf_rows([eager, nothing]), "torch_compile")
    assert row.not_compiled and row.speedup is None
    assert "80.0 [" in markdown(build_report([eager, nothing], "test", Selection())).split("not compiled")[0][-40:]
    some = _with(compiled, metrics=compiled.metrics.model_copy(update={
        "applied": compiled.metrics.applied.model_copy(update={"compiled_graphs": 3})}))
    assert _row(perf_rows([eager, some]), "torch_compile").speedup.value == pytest.approx(80 / 50)
    # ONNX Runtime compiles outside dynamo: no dynamo graph says nothing of it
    ort = make_result("tinyllama-1.1b", "onnxruntime_cuda", 1, "h100", "local", tokens_per_s=80.0)
    ort = _with(ort, metrics=ort.metrics.model_copy(update={
        "applied": ort.metrics.applied.model_copy(update={"compiled_graphs": 0})}))
    row = _row(perf_rows([eager, ort]), "onnxruntime_cuda")
    assert not row.not_compiled and row.speedup.value == pytest.approx(80 / 50)


def test_runs_with_different_settings_never_share_a_cell_or_a_speedup():
    eager = make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0)
    compiled = make_result("ffn-tinyllama", "torch_compile", 1, "h100", "local", tflops=150.0)
    other_job = compiled.job.model_copy(update={"repeats": 3})
    other = _with(compiled, job=other_job, job_id=other_job.job_id)
    rows = perf_rows([eager, compiled, other])
    tables = throughput_tables(rows)
    assert len(tables) == 2 and len({table.settings for table in tables}) == 2
    assert [r for r in rows if r.result is other][0].speedup is None  # no eager run with its settings
    assert [r for r in rows if r.result is compiled][0].speedup.value == pytest.approx(1.5)
    # a workflow's own options (eager has none) keep it in its own table, against the same eager run
    optioned_job = compiled.job.model_copy(update={"options": compiled.job.options.model_copy(
        update={"compile_mode": "max-autotune"})})
    optioned = _with(compiled, job=optioned_job, job_id=optioned_job.job_id)
    rows = perf_rows([eager, compiled, optioned])
    tables = throughput_tables(rows)
    assert len(tables) == 2
    # a reader tells the two tables apart by the option, not by a hash
    assert sorted("options compile_mode=max-autotune" in table.settings for table in tables) == [False, True]
    assert [r for r in rows if r.result is optioned][0].speedup.value == pytest.approx(1.5)


def test_the_baseline_comes_from_the_same_sweep_else_the_sweep_is_named():
    def in_sweep(result, sweep, ended):
        return _with(result, provenance=result.provenance.model_copy(update={"sweep_id": sweep, "ended_at": ended}))

    old_eager = in_sweep(make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=50.0), "s1", T0)
    new_eager = in_sweep(make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0, seed=1), "s2",
                         T0 + timedelta(hours=1))
    new_eager = _with(new_eager, job=old_eager.job, job_id=old_eager.job_id)
    compiled = in_sweep(make_result("ffn-tinyllama", "torch_compile", 1, "h100", "local", tflops=150.0), "s1",
                        T0 + timedelta(minutes=5))
    speedup = _row(perf_rows([old_eager, new_eager, compiled]), "torch_compile").speedup
    assert speedup.value == pytest.approx(3.0) and speedup.baseline_sweep is None
    speedup = _row(perf_rows([new_eager, compiled]), "torch_compile").speedup
    assert speedup.value == pytest.approx(1.5) and speedup.baseline_sweep == "s2"
    assert speedup.label().endswith("vs eager of sweep s2")


def test_figures_are_read_against_the_spec_and_the_ceiling_measured_in_the_sweep():
    result = make_result("ffn-tinyllama", "eager", 64, "h100", "local", tflops=400.0)
    result = _with(result, provenance=result.provenance.model_copy(update={"sweep_id": "s1"}))
    llm = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=50.0)
    llm = _with(llm, provenance=llm.provenance.model_copy(update={"sweep_id": "s1"}))
    ceiling = Calibration(device="cuda", copy_bytes=1 << 30, copy_gbs=3000.0, gemm_n=8192,
                          gemm_tflops={"bf16": 800.0}, gpu_tag="h100", sweep_id="s1", measured_at=T0)
    rows = perf_rows([result, llm], [ceiling])
    synthetic = _row([r for r in rows if r.kind == "synthetic"], "eager")
    assert synthetic.efficiency == pytest.approx(400 / 989) and synthetic.measured_efficiency == pytest.approx(0.5)
    decode = _row([r for r in rows if r.kind == "llm"], "eager")
    assert decode.measured_efficiency == pytest.approx(decode.efficiency * 3350 / 3000)
    text = markdown(build_report([result, llm], "test", Selection(), calibrations=(ceiling,)))
    assert "3,000 GB/s (spec 3,350)" in text and "bf16 800.0 TFLOPS (spec 989.0)" in text


def test_a_figure_over_the_ceiling_measured_in_the_sweep_is_flagged_and_never_printed_as_a_finding():
    result = make_result("ffn-tinyllama", "eager", 64, "h100", "local", tflops=900.0)
    result = _with(result, provenance=result.provenance.model_copy(update={"sweep_id": "s1"}))
    ceiling = Calibration(device="cuda", copy_bytes=1 << 30, copy_gbs=3000.0, gemm_n=8192,
                          gemm_tflops={"bf16": 800.0}, gpu_tag="h100", sweep_id="s1", measured_at=T0)
    [row] = perf_rows([result], [ceiling])
    assert row.efficiency < 1 < row.measured_efficiency and "over 100 % of a bound" in row.flags()
    text = markdown(build_report([result], "test", Selection(), calibrations=(ceiling,)))
    assert "91.0 % spec / over 100 % (bound or timing wrong) measured" in text and "112.5 %" not in text


def test_throttled_is_read_only_from_clocks_taken_during_the_timed_calls():
    """A slowdown at the start or end of a job (say, left by the previous job) says nothing of its timed calls."""
    from mlcbench.schema import Clocks

    result = make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0)
    outside = _with(result, provenance=result.provenance.model_copy(update={"clocks": [
        Clocks(at="start", sm_mhz=1980, reasons=["gpu_idle"]), Clocks(at="end", sm_mhz=1400, reasons=["sw_thermal"])]}))

    def during(reasons):
        latency = result.metrics.latency
        processes = [latency.processes[0].model_copy(update={"clocks": [Clocks(at="during", sm_mhz=1400,
                                                                                  reasons=reasons)]}),
                     *latency.processes[1:]]
        return _with(result, metrics=result.metrics.model_copy(update={
            "latency": latency.model_copy(update={"processes": processes})}))

    assert perf_rows([result])[0].flags() == [] and perf_rows([outside])[0].flags() == []
    assert perf_rows([during(["gpu_idle"])])[0].flags() == []  # not a slowdown
    assert perf_rows([during(["sw_thermal"])])[0].flags() == ["throttled"]


def test_compare_of_two_stores_shows_each_cells_change_with_its_interval_and_counts_the_significant(tmp_path):
    from typer.testing import CliRunner

    from mlcbench.orchestrator.cli import app
    from tests.reports.conftest import fixture_results, store_with

    first = fixture_results()
    faster = make_result("tinyllama-1.1b", "torch_compile_static", 1, "h100", "local", tokens_per_s=500.0,
                         passed=True, decode_loop="hf_generate")
    second = [faster if (r.job_id, r.provenance.env, r.provenance.gpu_tag) == (
        faster.job_id, "local", "h100") else r for r in first]
    store_with(tmp_path / "a.db", first)
    store_with(tmp_path / "b.db", second)
    output = CliRunner().invoke(app, ["compare", "--db", f"sqlite:///{tmp_path / 'a.db'}", "--against",
                                      str(tmp_path / "b.db")], catch_exceptions=False).output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in output.splitlines() if line.startswith("│")]
    labels = {(row[0], row[1], row[2], row[3]): row[7] for row in rows}
    assert labels[("tinyllama-1.1b", "torch_compile_static", "1", "local @ h100")].startswith("2.00× [")
    # the same cell in both stores: the same, within its narrow interval
    assert labels[("tinyllama-1.1b", "torch_compile_static", "1", "local @ rtx4090")].startswith("≈ [")
    assert "(equal within" in labels[("tinyllama-1.1b", "torch_compile_static", "1", "local @ rtx4090")]
    # the cell that failed its check in both stores: no ratio
    assert labels[("tinyllama-1.1b", "torch_compile_static", "4", "local @ h100")] == "— (check failed: no ratio)"
    judged = sum(1 for label in labels.values() if label != "—" and "no verdict" not in label
                 and "check failed" not in label)
    assert " ".join(output.split()).count(f"1 of {judged} judged") == 1


CHECKED = {"passed": True}


def test_the_fastest_line_says_two_workflows_are_the_same_only_where_the_interval_is_narrow():
    """Equal within a few % is a verdict ("the same"); an interval that leaves a larger difference open is noise."""
    narrow = throughput_tables(perf_rows(list(_pair([[1.0, 1.0], [1.01, 1.01], [0.99, 0.99]],
                                                    [[1.0, 1.0], [1.005, 1.005], [0.995, 0.995]], **CHECKED))))
    [verdict] = narrow[0].fastest
    assert verdict.workflow is None and "are equal within" in verdict.text and "noise" not in verdict.text
    margin = float(verdict.text.split("equal within ")[1].split(" %")[0])
    assert 0 < margin <= 5
    wide = throughput_tables(perf_rows(list(_pair([[1.0, 1.0], [1.3, 1.3], [0.8, 0.8]],
                                                  [[1.0, 1.0], [1.2, 1.2], [0.85, 0.85]], **CHECKED))))
    [verdict] = wide[0].fastest
    assert verdict.workflow is None and "within noise" in verdict.text and "equal within" not in verdict.text


def test_a_cell_that_compiled_nothing_says_so_in_results_and_scores_nothing_in_p3():
    from rich.console import Console

    from mlcbench.orchestrator.reports.sections.p3 import p3_rows
    from mlcbench.orchestrator.reports.tables import results_table

    eager = make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=50.0)
    compiled = make_result("tinyllama-1.1b", "torch_compile", 1, "h100", "local", tokens_per_s=80.0, passed=True,
                           compile_s=20.0)
    nothing = _with(compiled, metrics=compiled.metrics.model_copy(update={
        "applied": compiled.metrics.applied.model_copy(update={"compiled_graphs": 0})}))
    for width in (80, 250):  # the compact table and the wide one
        console = Console(width=width, record=True)
        console.print(results_table([eager, nothing]))
        assert console.export_text().count("(not compiled)") == 1
    (p3,) = [row for row in p3_rows(perf_rows([eager, nothing])) if row.workflow == "torch_compile"]
    assert p3.productivity is None and p3.performance is None and p3.cells_ran == 0 and p3.gpus_ran == ()
