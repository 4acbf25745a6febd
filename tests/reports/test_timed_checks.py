"""What reports make of a cell whose timed calls compared too few tokens, of an impossible figure and of a synthetic
cell that ran eager's ops: no verdict, the label, and the counts in results, export and the report."""

from rich.console import Console

from mlcbench.orchestrator import stats
from mlcbench.orchestrator.reports.data import implausible, no_verdict, not_compiled
from mlcbench.orchestrator.reports.export import flat_row
from mlcbench.orchestrator.reports.markdown import markdown
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.selection import Selection
from mlcbench.orchestrator.reports.tables import results_table
from mlcbench.schema import Correctness
from tests.reports.test_verdicts import cell


def _with_timed_tokens(result, compared: int, generated: int = 1000):
    check = result.correctness.model_copy(update={"timed_tokens": generated, "timed_tokens_compared": compared})
    return result.model_copy(update={"correctness": check})


def _shown(result) -> str:
    console = Console(width=250, record=True)
    console.print(results_table([result]))
    return console.export_text()


def test_a_cell_that_compared_under_90_percent_of_its_timed_tokens_says_timed_calls_not_checked():
    checked = _with_timed_tokens(cell("tinyllama-1.1b", "torch_compile_decode", [10, 10, 10]), compared=900)
    unchecked = _with_timed_tokens(cell("tinyllama-1.1b", "torch_compile_decode", [10, 10, 10]), compared=899)
    assert no_verdict(checked) is None and no_verdict(unchecked) == "timed calls not checked"
    assert "900 of 1000 timed tokens compared" in _shown(checked) and "yes" in _shown(checked)
    assert "timed calls not checked: 899 of 1000" in _shown(unchecked)
    row = flat_row(unchecked)
    assert (row.timed_tokens, row.timed_tokens_compared, row.no_verdict) == (1000, 899, "timed calls not checked")
    report = markdown(build_report([checked, unchecked], "test", Selection()))
    assert "timed tokens compared" in report and "not checked" in report


def test_a_cell_sums_its_processes_timed_tokens():
    checks = [Correctness(tolerance=0.1, passed=True, timed_tokens=256, timed_tokens_compared=compared)
              for compared in (256, 200)]
    combined = stats.combine_checks(checks)
    assert (combined.timed_tokens, combined.timed_tokens_compared) == (512, 456)
    stored_before = stats.combine_checks([checks[0], Correctness(tolerance=0.1, passed=True)])
    assert stored_before.timed_tokens is None


def test_a_figure_over_the_gpus_catalog_peak_or_a_cpus_generous_bound_is_implausible():
    plausible = cell("ffn-tinyllama", "torch_compile", [10, 10, 10])  # 10 TFLOPS on an H100
    over_peak = cell("ffn-tinyllama", "torch_compile", [0.05, 0.05, 0.05])  # 2,000 TFLOPS
    assert implausible(plausible) is None and no_verdict(plausible) is None
    assert "peak TFLOPS" in implausible(over_peak) and no_verdict(over_peak) == "implausible"
    assert "implausible" in _shown(over_peak)

    def on_cpu(median_ms: float, threads: int):
        result = cell("ffn-tinyllama", "torch_compile", [median_ms] * 3, device_kind="cpu")
        latency = result.metrics.latency
        processes = [process.model_copy(update={"cpu_threads": threads}) for process in latency.processes]
        return result.model_copy(update={"metrics": result.metrics.model_copy(
            update={"latency": latency.model_copy(update={"processes": processes})})})
    assert implausible(on_cpu(10, 2)) is None  # 10 TFLOPS on 2 threads: under 2 x 8
    assert "on 2 CPU thread(s)" in implausible(on_cpu(1, 2))  # 100 TFLOPS
    assert implausible(on_cpu(1, 64)) is None  # a large host may


def test_a_synthetic_cell_whose_call_ran_eagers_ops_is_not_compiled():
    result = cell("ffn-tinyllama", "torchscript", [10, 10, 10])
    ran_eager = result.model_copy(update={"metrics": result.metrics.model_copy(update={"compiled_code_ran": False})})
    assert not not_compiled(result) and not_compiled(ran_eager) and no_verdict(ran_eager) == "not compiled"
    assert "(not compiled)" in _shown(ran_eager) and "(not compiled)" not in _shown(result)
