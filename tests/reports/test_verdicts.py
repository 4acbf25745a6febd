"""Verdicts weighted by evidence: a figure is a finding only from >= 3 processes and a passed check, flags single
out, tiny cells are judged on device time, % of the decode bound comes from the timed calls themselves."""

import re
from pathlib import Path
from typing import Optional

import pytest
from rich.console import Console

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports import figures
from mlcbench.orchestrator.reports.data import WIDE_INTERVAL, perf_rows
from mlcbench.orchestrator.reports.html import write_html
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.sections.compare import compare, comparison_table
from mlcbench.orchestrator.reports.sections.costs import cost_rows
from mlcbench.orchestrator.reports.sections.decode import decode_lines
from mlcbench.orchestrator.reports.sections.p3 import p3_rows
from mlcbench.orchestrator.reports.sections.throughput import throughput_tables
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.terminal import report_renderables, table
from mlcbench.orchestrator.fractions import decode_step_bytes
from mlcbench.schema import GPUS, CompileCost, Correctness, JobSpec, Metrics, ProcessTiming, Provenance, Result


def _spread(median: float) -> list[float]:
    return [median * 0.99, median, median * 1.01]


def cell(model: str, workflow: str, medians: list[float], batch: int = 1, gpu: str = "h100", env: str = "local",
         passed: Optional[bool] = True, device: Optional[list[float]] = None, series: str = "warm",
         compiles: list[tuple[float, str]] = (), device_kind: str = "cuda") -> Result:
    """A cell as the host stores it: one ProcessTiming per process median (whole call, and device time where given),
    combined over processes; its figure is inversely proportional to its time."""
    processes = [ProcessTiming(samples_ms=_spread(m), device_samples_ms=_spread(device[i]) if device else [],
                               device_method="cuda_graph_replay_queued" if device else None,
                               compile_s=compiles[i][0] if compiles else None,
                               compile_cache=compiles[i][1] if compiles else None) for i, m in enumerate(medians)]
    timing = stats.combine(processes, "cuda_events", 0.02).model_copy(update={"series": series})
    if device:
        on_device = stats.combine([ProcessTiming(samples_ms=_spread(m)) for m in device], "cuda_events", 0.02)
        timing = timing.model_copy(update={"device_median_ms": on_device.median_ms,
                                           "device_ci_low_ms": on_device.ci_low_ms,
                                           "device_ci_high_ms": on_device.ci_high_ms,
                                           "device_method": "cuda_graph_replay_queued"})
    llm = not model.startswith("ffn")
    job = JobSpec(model=model, workflow=workflow, batch_size=batch, device=device_kind,
                  precision="fp16" if model.startswith("llama2") else "bf16")
    colds = [s for s, state in compiles if state == "cold"]
    warms = [s for s, state in compiles if state == "warm"]
    metrics = Metrics(
        latency=timing, tokens_per_s=batch * 32 / timing.median_ms * 1e3 if llm else None,
        tflops=None if llm else 100.0 / timing.median_ms,
        compile_s=compiles[0][0] if compiles else None,
        compile_cold=CompileCost(median_s=sorted(colds)[len(colds) // 2], min_s=min(colds), max_s=max(colds),
                                 n=len(colds)) if colds else None,
        compile_warm=CompileCost(median_s=sorted(warms)[len(warms) // 2], min_s=min(warms), max_s=max(warms),
                                 n=len(warms)) if warms else None)
    check = None if passed is None else Correctness(method="outputs", tolerance=0.02, passed=passed,
                                                    processes_checked=len(medians),
                                                    processes_failed=0 if passed else 1)
    return Result(job_id=job.job_id, job=job, status="ok", metrics=metrics, correctness=check,
                  provenance=Provenance(env=env, gpu_tag=gpu))


def _row(rows, workflow, gpu="h100"):
    [row] = [r for r in rows if r.workflow == workflow and r.gpu == gpu]
    return row


def _terminal(report) -> str:
    console = Console(width=400, record=True)
    for renderable in report_renderables(report):
        console.print(renderable)
    return console.export_text()


EAGER = [10.0, 10.1, 9.9]


@pytest.mark.parametrize("processes, shown", [(1, "n=1"), (2, "n=2, no verdict")])
def test_a_cell_with_fewer_than_three_processes_gets_no_verdict_and_no_p3_score(processes, shown):
    eager = cell("ffn-tinyllama", "eager", EAGER)
    compiled = cell("ffn-tinyllama", "torch_compile", [5.0, 5.02][:processes])
    rows = perf_rows([eager, compiled])
    row = _row(rows, "torch_compile")
    assert row.no_verdict == f"n={processes}"
    # the ratio is shown, never counted
    assert row.speedup.value == pytest.approx(2.0, rel=0.01) and not row.speedup.verdict
    scores = {p.workflow: p for p in p3_rows(rows)}
    assert scores["torch_compile"].performance is None
    assert (scores["torch_compile"].speedup_pairs, scores["torch_compile"].speedups_without_verdict) == (0, 1)
    [table] = throughput_tables(rows)
    assert table.fastest[0].workflow == "eager"
    assert f"not judged: torch_compile (n={processes})" in table.fastest[0].text
    text = markdown(build_report([eager, compiled], "test", Selection()))
    [line] = [line for line in text.splitlines() if line.startswith("| torch_compile |") and "warm" in line]
    assert f"warm {shown}" in line


def test_an_eager_baseline_with_one_process_makes_every_speedup_over_it_no_verdict():
    eager = cell("ffn-tinyllama", "eager", [10.0])
    compiled = cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98])
    rows = perf_rows([eager, compiled])
    speedup = _row(rows, "torch_compile").speedup
    assert not speedup.verdict and speedup.label() == "2.00× (no interval), eager n=1: no verdict"
    assert {p.workflow: p for p in p3_rows(rows)}["torch_compile"].performance is None


def test_three_processes_and_a_passed_check_make_a_verdict_and_a_p3_score():
    rows = perf_rows([cell("ffn-tinyllama", "eager", EAGER), cell("ffn-tinyllama", "torch_compile", [4.9, 4.92, 4.88])])
    assert _row(rows, "torch_compile").speedup.verdict
    assert {p.workflow: p for p in p3_rows(rows)}["torch_compile"].performance == 4  # 2.04x
    [table] = throughput_tables(rows)
    assert table.fastest[0].workflow == "torch_compile" and "over eager" in table.fastest[0].text


def test_a_failed_check_gets_no_speedup_no_p3_score_and_no_fastest_in_every_report(tmp_path: Path):
    eager = cell("ffn-tinyllama", "eager", EAGER)
    wrong = cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98], passed=False)
    elsewhere = [cell("ffn-tinyllama", "eager", EAGER, gpu="h200"),
                 cell("ffn-tinyllama", "torch_compile", [4.0, 4.02, 3.98], gpu="h200")]
    results = [eager, wrong, *elsewhere]
    rows = perf_rows(results)
    row = _row(rows, "torch_compile")
    assert row.speedup is None and row.no_verdict == "check failed"
    p3 = {p.workflow: p for p in p3_rows(rows)}["torch_compile"]
    assert p3.speedup_pairs == 1 and p3.median_speedup == pytest.approx(2.5, rel=0.01)  # the h200 cell only
    assert p3.checks_failed == 1
    [h100] = [t for t in throughput_tables(rows) if t.gpu == "h100"]
    assert h100.fastest[0].workflow == "eager" and "torch_compile (check failed)" in h100.fastest[0].text

    report = build_report(results, "test", Selection())
    # the wrong cell's speedup would read 2.00×; the h200 one reads 2.50×
    for text in (_terminal(report), markdown(report), write_html(report, tmp_path / "html").read_text()):
        flat = " ".join(text.split())
        assert "✗ check FAILED: no speedup, no verdict" in flat
        assert "2.00×" not in flat and "2.50× [" in flat
    comparison = compare(rows, "gpu", "h100", "h200")
    [compared] = [r for r in comparison.rows if r.workflow == "torch_compile"]
    assert compared.ratio is None and compared.label() == "— (check failed: no ratio)"
    console = Console(width=300, record=True)
    console.print(table(comparison_table(comparison)))
    assert "check failed: no ratio" in console.export_text()
    assert comparison.judged == 1  # eager only
    assert f"{comparison.flagged} of 2 row(s) flagged ⚠" in comparison.summary()


@pytest.mark.parametrize("reach, flagged", [(WIDE_INTERVAL - 0.01, False), (WIDE_INTERVAL + 0.01, True)])
def test_the_interval_flag_fires_only_past_the_stated_threshold(reach, flagged):
    result = cell("ffn-tinyllama", "eager", EAGER)
    latency = result.metrics.latency
    latency = latency.model_copy(update={"ci_low_ms": latency.median_ms * (1 - reach),
                                         "ci_high_ms": latency.median_ms * (1 + reach)})
    result = result.model_copy(update={"metrics": result.metrics.model_copy(update={"latency": latency})})
    [row] = perf_rows([result])
    assert bool(row.flags()) == flagged
    text = markdown(build_report([result], "test", Selection()))
    assert ("⚠ interval" in text) == flagged
    assert f"more than ±{100 * WIDE_INTERVAL:g} %" in text  # the threshold is stated where the flag is explained


def test_a_tiny_cell_is_judged_on_device_time_where_both_sides_have_it():
    """Whole calls of a sub-millisecond cell spread 3x between processes (the launch cost): no verdict from them; the
    device times tell the two workflows apart."""
    eager = cell("ffn-tinyllama", "eager", [0.3, 0.9, 0.5], device=[0.200, 0.202, 0.198])
    compiled = cell("ffn-tinyllama", "torch_compile", [0.35, 0.8, 0.4], device=[0.100, 0.101, 0.099])
    whole_call = stats.speedup(eager.metrics.latency, compiled.metrics.latency)
    assert whole_call.significant is False
    rows = perf_rows([eager, compiled])
    speedup = _row(rows, "torch_compile").speedup
    assert speedup.figure == "device time" and speedup.significant and speedup.value == pytest.approx(2.0, rel=0.01)
    # what the whole calls said is shown beside: the device time separated a cell the whole call could not
    assert "on device time; whole call ≈ (not significant)" in speedup.label()
    # the figure that decides is tight: no flag; the whole call's own figure and interval are still shown
    row = _row(rows, "torch_compile")
    assert row.flags() == [] and row.decided_on == "device time"
    assert row.device.median_ms == pytest.approx(0.1, rel=0.01)
    text = markdown(build_report([eager, compiled], "test", Selection()))
    assert re.search(r"; device time \(CUDA-graph replay\) [\d.,]+ \[[\d.,]+–[\d.,]+\] \([12]\.\d\d× \[[\d.]+–[\d.]+\] on device time;",
                     text)
    [table] = throughput_tables(rows)
    assert table.fastest[0].workflow == "torch_compile" and "on device time" in table.fastest[0].text


def test_a_cell_over_a_millisecond_is_judged_on_the_whole_call():
    eager = cell("ffn-tinyllama", "eager", EAGER, device=[9.0, 9.1, 8.9])
    compiled = cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98], device=[2.0, 2.01, 1.99])
    speedup = _row(perf_rows([eager, compiled]), "torch_compile").speedup
    assert speedup.figure == "whole call" and speedup.value == pytest.approx(2.0, rel=0.01)


def _llm(step_ms: Optional[float], tpot_ms: float = 9.0) -> Result:
    result = cell("llama2-7b", "torch_compile_decode", [180.0, 181.0, 179.0], passed=True)
    latency = result.metrics.latency.model_copy(update={
        "step_median_ms": step_ms, "step_ci_low_ms": step_ms and step_ms * 0.99,
        "step_ci_high_ms": step_ms and step_ms * 1.01})
    return result.model_copy(update={"metrics": result.metrics.model_copy(
        update={"latency": latency, "tpot_ms": tpot_ms})})


def test_the_percent_of_the_decode_bound_divides_by_the_step_time_of_the_timed_calls_not_tpot():
    step_bytes = decode_step_bytes(_llm(5.6).job)
    [row] = perf_rows([_llm(5.6, tpot_ms=6.0)])
    assert row.efficiency == pytest.approx(step_bytes / 5.6e-3 / (GPUS["h100"].bandwidth_gbs * 1e9))
    [line] = decode_lines([_llm(5.6, tpot_ms=6.0)])
    text = line.describe()
    assert "5.60 ms [5.54–5.66] per step" in text and "TPOT 6.00 ms (synchronised per token)" in text


def test_a_row_stored_without_step_time_says_so_instead_of_using_tpot():
    [row] = perf_rows([_llm(None, tpot_ms=6.0)])
    assert row.efficiency is None and row.step_time_missing
    text = markdown(build_report([_llm(None, tpot_ms=6.0)], "test", Selection()))
    assert ", no step time" in text and "% spec" not in text
    [line] = decode_lines([_llm(None, tpot_ms=6.0)])
    assert line.describe().endswith("no step time (stored before the timed calls' step time was recorded, so no % "
                                    "of the bound); TPOT (synchronised per token) b1 6.00 ms")


def test_a_figure_over_its_bound_is_flagged_and_never_printed_as_a_finding():
    fast = _llm(1.0)  # 1 ms per step would read 13 GB at 13 TB/s: over the H100's 3.35 TB/s
    [row] = perf_rows([fast])
    assert row.efficiency > 1 and "over 100 % of a bound" in row.flags()
    text = markdown(build_report([fast], "test", Selection()))
    assert "over 100 % (bound or timing wrong) spec" in text
    assert not re.search(r"\d{3,}\.\d %", text)
    [line] = decode_lines([fast])
    assert "over 100 % (bound or timing wrong) of the bound" in line.describe()


def test_cells_name_their_series_and_compile_cost_is_cold_and_warm_each_with_its_count():
    compiles = [(100.0, "cold"), (12.0, "warm"), (10.0, "warm"), (14.0, "warm")]
    warm = cell("tinyllama-1.1b", "torch_compile_decode", [20.0, 20.1, 19.9, 20.0], compiles=compiles)
    cold_only = cell("tinyllama-1.1b", "torch_compile_decode", [25.0, 25.1, 24.9], batch=4, series="cold",
                     compiles=[(90.0, "cold")] * 3)
    b1, b4 = cost_rows([warm, cold_only])
    # each cell's own compiles (one program each), never a median over both batches
    assert (b1.batch, b1.compile_cold_s, b1.compile_cold_n, b1.compile_warm_s, b1.compile_warm_n) == (1, 100.0, 1, 12.0, 3)
    assert (b4.batch, b4.compile_cold_s, b4.compile_cold_n, b4.compile_warm_s, b4.compile_warm_n) == (4, 90.0, 3, None, 0)
    text = markdown(build_report([warm, cold_only], "test", Selection()))
    assert "100.0 (n=1) / 12.0 (n=3)" in text
    [line] = [line for line in text.splitlines() if line.startswith("| torch_compile_decode |") and "[" in line]
    assert re.search(r"\| [\d.,]+ \[[\d.,–]+\] warm.*\| [\d.,]+ \[[\d.,–]+\] cold", line)


def test_cold_and_warm_compile_cost_come_from_the_cells_combined_figures_where_it_has_them():
    """The host combines a cell's compile cost over all its processes (a cold series set aside included)."""
    result = cell("tinyllama-1.1b", "torch_compile_decode", [20.0, 20.1, 19.9], compiles=[(12.0, "warm")] * 3)
    result = result.model_copy(update={"metrics": result.metrics.model_copy(update={
        "compile_cold": CompileCost(median_s=180.0, min_s=175.0, max_s=185.0, n=2)})})
    [cost] = cost_rows([result])
    assert (cost.compile_cold_s, cost.compile_cold_n, cost.compile_warm_s, cost.compile_warm_n) == (180.0, 2, 12.0, 3)


def test_p3_portability_counts_only_envs_that_ran():
    ran = cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98])
    never = Result.without_run(ran.job, "unsupported", "no Docker engine")
    never = never.model_copy(update={"provenance": Provenance(env="triton-2504", gpu_tag="h100")})
    [score] = p3_rows(perf_rows([ran, never]))
    assert (score.cells_ran, score.cells_tried, score.portability) == (1, 1, 5)
    # an env that ran something on that GPU does count
    other = cell("ffn-tinyllama", "eager", EAGER, env="triton-2504")
    score = {p.workflow: p for p in p3_rows(perf_rows([ran, never, other]))}["torch_compile"]
    assert (score.cells_ran, score.cells_tried, score.portability) == (1, 2, 3)


def test_a_cpu_run_is_read_against_no_gpu_peak(tmp_path: Path):
    on_cpu = [cell("ffn-tinyllama", "eager", EAGER, device_kind="cpu"),
              cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98], device_kind="cpu")]
    assert all(row.efficiency is None for row in perf_rows(on_cpu))
    page = write_html(build_report(on_cpu, "test", Selection()), tmp_path / "cpu").read_text()
    assert "GPU&#x27;s peak" not in page and "GPU's peak" not in page and "of peak (spec" not in page
    on_gpu = [result.model_copy(update={"job": result.job.model_copy(update={"device": "cuda"})}) for result in on_cpu]
    page = write_html(build_report(on_gpu, "test", Selection()), tmp_path / "gpu").read_text()
    assert "with the GPU&#x27;s peak" in page and "of peak (spec" in page


def test_a_cpu_run_under_a_gpu_tag_draws_no_peak_line(tmp_path: Path, monkeypatch):
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, out_dir, filename: drawn.append(figure))
    on_cpu = [cell("ffn-tinyllama", "eager", EAGER, device_kind="cpu")]  # tagged h100 (--force-gpu-tag)
    figures.write_figures(build_report(on_cpu, "test", Selection()), tmp_path)
    labels = [label for figure in drawn for axes in figure.axes for label in axes.get_legend_handles_labels()[1]]
    assert labels and not any("peak" in label for label in labels)


def test_html_figures_draw_each_points_interval(tmp_path: Path, monkeypatch):
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, out_dir, filename: drawn.append((filename, figure)))
    results = [cell("ffn-tinyllama", "eager", EAGER), cell("ffn-tinyllama", "torch_compile", [5.0, 5.02, 4.98]),
               cell("ffn-tinyllama", "eager", EAGER, gpu="h200"),
               cell("ffn-tinyllama", "torch_compile", [4.0, 4.02, 3.98], gpu="h200")]
    figures.write_figures(build_report(results, "test", Selection()), tmp_path)
    bars = {name: [c for axes in figure.axes for c in axes.containers if type(c).__name__ == "ErrorbarContainer"]
            for name, figure in drawn}
    assert bars["synthetic-ffn-tinyllama-h100.png"] and bars["compare-gpu-h100-vs-h200.png"]


def test_a_failed_check_says_how_it_was_checked_and_where_it_failed_in_every_report(tmp_path: Path):
    wrong = cell("tinyllama-1.1b", "torch_compile_decode", [20.0, 20.1, 19.9, 20.2, 19.8], passed=False)
    check = wrong.correctness.model_copy(update={"method": "teacher_forced", "steps_checked": 32, "worst_step": 3,
                                                 "worst_row": 7, "tokens_beyond_noise": 2, "worst_token_margin": 4.2,
                                                 "calls_checked": 2, "processes_checked": 5, "processes_failed": 1})
    wrong = wrong.model_copy(update={"correctness": check})
    results = [cell("tinyllama-1.1b", "eager", [40.0, 40.2, 39.8]), wrong]
    report = build_report(results, "test", Selection())
    where = ("teacher_forced, row 7, worst at step 3 of 32 checked, 2 token(s) beyond noise (margin up to 4.2x the "
             "noise), 2 calls a process, 1 of 5 processes failed")
    for text in (_terminal(report), markdown(report), write_html(report, tmp_path / "html").read_text()):
        assert where in " ".join(text.split())
    assert "### P3 summary" in markdown(report)


def test_the_report_sets_the_between_process_spread_of_the_whole_call_beside_the_device_time(tmp_path: Path):
    tiny = cell("ffn-tinyllama", "eager", [0.3, 0.9, 0.5], device=[0.200, 0.202, 0.198])
    report = build_report([tiny, cell("tinyllama-1.1b", "eager", [40.0, 40.2, 39.8])], "test", Selection())
    [row] = report.spread  # synthetic cells only
    assert row.whole_call == pytest.approx(3.0) and row.device == pytest.approx(0.202 / 0.198)
    for text in (_terminal(report), markdown(report), write_html(report, tmp_path / "html").read_text()):
        assert "3.00×" in text and "1.02× (CUDA-graph replay)" in text


def test_a_cell_whose_cold_and_warm_processes_ran_different_programs_is_reported_as_two_series(tmp_path: Path):
    """The precompile run's Llama-2 decode b1 cell pooled a cold process (178 ms) and a warm one without CUDA graphs
    (218 ms) into one figure; the host now keeps them apart and every report shows both."""
    processes = [ProcessTiming(samples_ms=_spread(m), compile_s=s, compile_cache=state)
                 for m, s, state in ((178.0, 180.0, "cold"), (179.0, 181.0, "cold"), (177.5, 179.0, "cold"),
                                     (218.0, 50.0, "warm"), (219.0, 52.0, "warm"), (217.0, 51.0, "warm"))]
    timing = stats.combine_cell(processes, "cuda_events", 0.02)
    assert timing.series == "warm" and len(timing.other_series) == 3
    result = cell("llama2-7b", "torch_compile_decode", [10.0], passed=True)
    result = result.model_copy(update={"metrics": result.metrics.model_copy(update={
        "latency": timing, "tokens_per_s": 32 / timing.median_ms * 1e3,
        "compile_cold": stats.compile_cost(processes, "cold"), "compile_warm": stats.compile_cost(processes, "warm")})})
    [row] = perf_rows([result])
    assert row.value == pytest.approx(32 / 218 * 1e3, rel=0.01)
    assert row.set_aside.name == "cold" and row.set_aside.processes == 3
    assert row.set_aside.value == pytest.approx(32 / 178.2 * 1e3, rel=0.01)
    report = build_report([result], "test", Selection())
    for text in (_terminal(report), markdown(report), write_html(report, tmp_path / "html").read_text()):
        flat = " ".join(text.split())
        assert re.search(r"146\.\d \[[\d.–]+\] warm; cold series \(another program, not in the figure\) 179\.\d "
                         r"\[[\d.–]+\] n=3", flat)
    [cost] = cost_rows([result])
    assert (cost.compile_cold_s, cost.compile_cold_n, cost.compile_warm_s, cost.compile_warm_n) == (180.0, 3, 51.0, 3)


def test_a_figure_s_legend_says_what_the_tables_say_of_its_points(tmp_path: Path, monkeypatch):
    """The smoke report drew a torch_compile line that compiled nothing, from one process (its table: "(not
    compiled)", "n=1"), as a plain workflow beside eager."""
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, out_dir, filename: drawn.append(figure))
    compiled = cell("tinyllama-1.1b", "torch_compile", [1.0])
    nothing = compiled.model_copy(update={"metrics": compiled.metrics.model_copy(update={
        "applied": compiled.metrics.applied.model_copy(update={"compiled_graphs": 0})})})
    once = cell("tinyllama-1.1b", "torch_compile_static", [2.0])
    results = [cell("tinyllama-1.1b", "eager", [40.0, 40.2, 39.8]), nothing, once]
    figures.write_figures(build_report(results, "test", Selection()), tmp_path)
    labels = {label for figure in drawn for axes in figure.axes for label in axes.get_legend_handles_labels()[1]}
    assert labels == {"eager", "torch_compile (not compiled)", "torch_compile_static (n=1: no verdict)"}
