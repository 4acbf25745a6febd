"""The GPU's energy over the timed calls, from the processes' windows (EnergyWindow) to every place figures are: the
cell's figures with their intervals over processes (stats), J/token and tokens/J, `results`, `export`, the report's
throughput tables, P3 and figure, and `compare`."""

import csv
import io
import math

import numpy as np
import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports.data import joules_per_unit, perf_rows, tokens_per_joule
from mlcbench.orchestrator.reports.export import to_csv
from mlcbench.orchestrator.reports.html import write_html
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.sections.compare import compare, comparison_table
from mlcbench.orchestrator.reports.sections.throughput import _cell
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.reports.tables import wide_table
from mlcbench.schema import ProcessTiming
from mlcbench.schema.results import EnergyWindow
from tests.reports.conftest import make_result

TOO_SHORT = "the timed window (0.2 s) is shorter than 20 x the energy counter's update period (0.1 s)"


def _window(joules_per_call: float, calls: int = 10, window_s: float = 10.0, start_c: int = 40, end_c: int = 50,
            sampled: float = 1.0) -> EnergyWindow:
    joules = joules_per_call * calls
    return EnergyWindow(joules=joules, window_s=window_s, calls=calls, update_period_s=0.1,
                        temperature_start_c=start_c, temperature_end_c=end_c, sampled_joules=joules * sampled,
                        power_samples=1000)


def _processes(median_ms: float, windows: list[EnergyWindow], cache: str = "warm") -> list[ProcessTiming]:
    return [ProcessTiming(samples_ms=[median_ms * f for f in (0.999, 1.0, 1.001)], energy=window,
                          compile_cache=cache) for window in windows]  # type: ignore[arg-type]


def _with_energy(result, windows: list[EnergyWindow]):
    """The result with its figure kept and its processes carrying these energy windows."""
    latency = result.metrics.latency
    timing = stats.combine_cell(_processes(latency.median_ms, windows), latency.method, 0.02)
    return result.model_copy(update={"metrics": result.metrics.model_copy(update={"latency": timing})})


def _llm(workflow: str, tokens_per_s: float, joules_per_call: list[float], gpu: str = "h100", batch: int = 4):
    return _with_energy(make_result("tinyllama-1.1b", workflow, batch, gpu, "local", tokens_per_s=tokens_per_s,
                                    passed=None if workflow == "eager" else True, compile_s=5.0,
                                    decode_loop="hf_generate"),
                        [_window(joules) for joules in joules_per_call])


def test_a_cells_energy_is_the_geometric_mean_of_its_processes_with_students_t_over_their_logarithms():
    windows = [_window(10.0, start_c=40, end_c=52), _window(11.0, start_c=41, end_c=54),
               _window(12.0, start_c=42, end_c=56, sampled=1.04)]
    energy = stats.combine_cell(_processes(5.0, windows), "cuda_events", 0.02).energy
    logs = np.log([10.0, 11.0, 12.0])
    half = scipy_stats.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert energy.processes == 3 and energy.method == "nvml_energy_counter_timed_window"
    assert energy.joules_per_call.value == pytest.approx(math.exp(logs.mean()))
    assert energy.joules_per_call.low == pytest.approx(math.exp(logs.mean() - half))
    assert energy.joules_per_call.high == pytest.approx(math.exp(logs.mean() + half))
    # power: the counter's joules over the window's seconds, per process
    assert energy.power_w.value == pytest.approx(math.exp(np.log([10.0, 11.0, 12.0]).mean()))  # 10 calls in 10 s
    # temperatures: arithmetic means with t
    end_half = scipy_stats.t.ppf(0.975, 2) * np.std([52, 54, 56], ddof=1) / math.sqrt(3)
    assert energy.temperature_start_c.value == pytest.approx(41.0)
    assert energy.temperature_end_c.value == pytest.approx(54.0)
    assert energy.temperature_end_c.high == pytest.approx(54.0 + end_half)
    assert energy.sampled_ratio.value == pytest.approx((1.04) ** (1 / 3))


def test_a_process_without_a_figure_is_left_out_of_the_energy_but_not_of_the_temperatures():
    short = EnergyWindow(window_s=0.2, calls=10, update_period_s=0.1, temperature_start_c=60, temperature_end_c=60,
                         reason=TOO_SHORT)
    energy = stats.combine_cell(_processes(5.0, [_window(10.0), _window(10.0), short]), "cuda_events", 0.02).energy
    assert energy.processes == 2 and energy.joules_per_call.value == pytest.approx(10.0)
    assert energy.temperature_start_c.value == pytest.approx(140 / 3) and energy.reason is None


def test_a_cell_none_of_whose_windows_gave_a_figure_says_why_and_one_stored_before_energy_has_none():
    short = EnergyWindow(window_s=0.2, calls=10, update_period_s=0.1, reason=TOO_SHORT)
    energy = stats.combine_cell(_processes(5.0, [short] * 3), "cuda_events", 0.02).energy
    assert energy.joules_per_call is None and energy.power_w is None and energy.processes == 0
    assert energy.reason == TOO_SHORT
    assert stats.combine_cell([ProcessTiming(samples_ms=[1.0])] * 3, "cuda_events", 0.02).energy is None


def test_the_energy_comes_from_the_processes_of_the_figure_only():
    """A cell's cold processes, set aside as another program, take their energy with them."""
    cold = _processes(9.0, [_window(90.0)], cache="cold")
    warm = _processes(5.0, [_window(10.0), _window(10.1), _window(9.9)])
    timing = stats.combine_cell([*cold, *warm], "cuda_events", 0.02)
    assert timing.series == "warm"
    assert timing.energy.processes == 3 and timing.energy.joules_per_call.value == pytest.approx(10.0, rel=0.01)


def test_an_llm_cell_gives_joules_per_generated_token_and_tokens_per_joule_with_their_intervals():
    result = _llm("eager", 200.0, [12.8, 12.9, 13.0])  # batch 4 x 32 tokens a call
    per_call = result.metrics.latency.energy.joules_per_call
    per_token, unit = joules_per_unit(result)
    assert unit == "J/token" and per_token.value == pytest.approx(per_call.value / 128)
    assert (per_token.low, per_token.high) == pytest.approx((per_call.low / 128, per_call.high / 128))
    per_joule = tokens_per_joule(result)
    assert per_joule.value == pytest.approx(128 / per_call.value)
    assert (per_joule.low, per_joule.high) == pytest.approx((128 / per_call.high, 128 / per_call.low))
    synthetic = _with_energy(make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0),
                             [_window(2.0)] * 3)
    assert joules_per_unit(synthetic)[1] == "J/call" and tokens_per_joule(synthetic) is None


def test_a_result_one_worker_stored_reads_its_own_process_energy():
    """`mlcbench run` stores a worker's Timing as it came: its energy is its one process's."""
    result = make_result("tinyllama-1.1b", "eager", 4, "h100", "local", tokens_per_s=200.0)
    single = result.metrics.latency.model_copy(update={"energy": None, "processes": _processes(5.0, [_window(12.8)])})
    result = result.model_copy(update={"metrics": result.metrics.model_copy(update={"latency": single})})
    assert joules_per_unit(result)[0].value == pytest.approx(0.1)


def test_the_energy_ratio_between_two_cells_has_welchs_interval_over_their_process_figures():
    first = stats.combine_cell(_processes(5.0, [_window(j) for j in (20.0, 20.2, 19.8)]), "cuda_events", 0.02)
    second = stats.combine_cell(_processes(5.0, [_window(j) for j in (10.0, 10.1, 9.9)]), "cuda_events", 0.02)
    ratio = stats.energy_ratio(first, second)
    assert ratio.value == pytest.approx(0.5, rel=0.01) and ratio.significant and ratio.low < 0.5 < ratio.high
    same = stats.energy_ratio(first, first)
    assert same.value == pytest.approx(1.0) and same.significant is False
    assert stats.energy_ratio(first, stats.combine_cell([ProcessTiming(samples_ms=[1.0])], "cuda_events", 0.02)) is None


def _pair():
    return [_llm("eager", 200.0, [25.6, 25.7, 25.5]), _llm("torch_compile_static", 600.0, [12.8, 12.9, 12.7])]


def test_results_and_export_show_the_energy_and_say_why_where_there_is_none():
    eager, compiled = _pair()
    console = Console(width=400, record=True)
    console.print(wide_table([eager, compiled], "results"))
    text = console.export_text()
    assert "energy" in text and "0.1 [" in text and "J/token" in text
    console = Console(width=400, record=True)
    console.print(wide_table([make_result("tinyllama-1.1b", "eager", 4, "h100", "local", tokens_per_s=200.0)], "r"))
    assert "energy" not in console.export_text()  # no cell measured it: no column
    short = _with_energy(make_result("ffn-tinyllama", "eager", 1, "h100", "local", tflops=100.0),
                         [EnergyWindow(window_s=0.2, calls=10, update_period_s=0.1, reason=TOO_SHORT)] * 3)
    rows = {row["workflow"] + row["model"]: row for row in csv.DictReader(io.StringIO(to_csv([eager, short])))}
    llm, synthetic = rows["eagertinyllama-1.1b"], rows["eagerffn-tinyllama"]
    assert float(llm["joules_per_token"]) == pytest.approx(25.6 / 128, rel=0.01)
    assert float(llm["joules_per_token_ci_low"]) < float(llm["joules_per_token"]) < float(llm["joules_per_token_ci_high"])
    assert float(llm["joules_per_call"]) == pytest.approx(25.6, rel=0.01) and llm["energy_processes"] == "3"
    assert float(llm["power_w"]) == pytest.approx(25.6, rel=0.01) and float(llm["temperature_end_c"]) == 50
    assert llm["energy_method"] == "nvml_energy_counter_timed_window" and float(llm["power_check_ratio"]) == 1.0
    assert synthetic["joules_per_call"] == "" and synthetic["energy_reason"] == TOO_SHORT
    # beside a cell with a figure, `results` says why the other has none
    console = Console(width=400, record=True)
    console.print(wide_table([eager, short], "results"))
    assert f"none: {TOO_SHORT}"[:80] in console.export_text()
    # and the report's throughput table, in the cell's tooltip
    [row] = perf_rows([short])
    assert _cell(row).tooltip.endswith(f"no energy figure: {TOO_SHORT}")


def test_the_report_shows_joules_per_token_beside_throughput_tokens_per_joule_in_p3_and_a_figure(tmp_path):
    eager, compiled = _pair()
    report = build_report([eager, compiled], "test", Selection())
    text = markdown(report)
    throughput = text.split("LLM throughput")[1]
    assert "0.2 [" in throughput and "J/token" in throughput and "energy per generated token" in throughput
    [p3] = [row for row in report.p3 if row.workflow == "torch_compile_static"]
    assert p3.energy_pairs == 1 and p3.median_energy_gain == pytest.approx(2.0, rel=0.01)
    assert "tokens/J vs eager" in text and "2.00×, n=1" in text
    page = write_html(report, tmp_path / "html").read_text()
    assert (tmp_path / "html" / "llm-energy-tinyllama-1-1b-h100.png").is_file()
    assert "llm-energy-tinyllama-1-1b-h100.png" in page


def test_compare_gives_the_energy_ratio_with_its_interval():
    on_h100 = _llm("torch_compile_static", 600.0, [12.8, 12.9, 12.7])
    on_h200 = _llm("torch_compile_static", 700.0, [9.6, 9.7, 9.5], gpu="h200")
    comparison = compare(perf_rows([on_h100, on_h200]), "gpu", "h100", "h200")
    [row] = comparison.rows
    assert row.energy_change.value == pytest.approx(0.75, rel=0.01) and row.energy_change.significant
    table = comparison_table(comparison)
    assert "energy ratio [95 % interval]" in [column.header for column in table.columns]
    assert table.rows[0][8].text.startswith("0.75× [")


def test_the_ceilings_say_how_often_each_gpus_energy_counter_updates_or_why_it_has_none():
    from mlcbench.orchestrator.reports.sections.ceilings import ceiling_rows
    from mlcbench.schema import Calibration

    measured = Calibration(device="cuda", copy_bytes=1, gemm_n=1, gpu_tag="h200", energy_update_period_s=0.0251,
                           energy_update_intervals_s=[0.0249, 0.0251])
    missing = Calibration(device="cuda", copy_bytes=1, gemm_n=1, gpu_tag="v100",
                          energy_counter="no energy counter: NVMLError_NotSupported: Not Supported")
    rows = {row.gpu: row for row in ceiling_rows([measured, missing])}
    assert rows["h200"].energy_counter == "updates every 25 ms"
    assert rows["v100"].energy_counter.startswith("no energy counter")
