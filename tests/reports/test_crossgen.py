"""Two GPU generations: each workflow's gain against the bandwidth and peak ratios, and what bounds it."""

import math
from pathlib import Path
from typing import Optional

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.reports.sections.crossgen import Prediction, generation_rows, host_lines, prediction, verdict
from mlcbench.orchestrator.reports.data import perf_rows
from mlcbench.orchestrator.reports.sections.compare import compare
from mlcbench.orchestrator.reports.html import write_html
from mlcbench.orchestrator.reports.report import build_report
from mlcbench.orchestrator.reports.selection import Selection
from tests.reports.conftest import latency, make_result, store_with

H100_TO_H200 = Prediction(bandwidth=4800 / 3350, peak=1.0)


def test_h200_over_h100_predicts_the_bandwidth_ratio_and_equal_peaks():
    expected = prediction("h100", "h200", "bf16")
    assert expected.bandwidth == pytest.approx(1.433, abs=1e-3) and expected.peak == 1.0
    assert prediction("h100", "no-such-gpu", "bf16") is None


@pytest.mark.parametrize("low,high,says", [
    (1.38, 1.46, "memory-bound"),
    (0.97, 1.05, "not memory-bound: follows the peaks (compute) or neither (host)"),
    (1.10, 1.40, "between the two: mixed, or noise"),  # the interval straddles the midpoint (1.197)
    (1.80, 2.30, "beyond the bandwidth ratio: the hosts or clocks differ"),
])
def test_verdict_places_the_gain_between_the_two_predictions(low, high, says):
    assert verdict(low, high, H100_TO_H200) == says


def test_verdict_reads_a_comparison_taken_the_other_way_round():
    reversed_ = Prediction(bandwidth=3350 / 4800, peak=1.0)
    assert verdict(0.69, 0.71, reversed_) == "memory-bound"
    assert verdict(0.98, 1.01, reversed_).startswith("not memory-bound")
    assert verdict(1.0, 1.0, Prediction(bandwidth=1.0, peak=1.0)).startswith("no verdict")


Host = tuple[str, int]  # the CPU's model name, logical CPUs
XEON: Host = ("Intel(R) Xeon(R) Platinum 8480+", 16)
EPYC: Host = ("AMD EPYC 9654 96-Core Processor", 32)


def _two_generations(hosts: Optional[dict[str, Host]] = None) -> list:
    """ffn TFLOPS and LLM tokens/s on each GPU: the b1 cells gain like bandwidth, the b64 FFNs like the peaks; each
    GPU's results measured on its host in `hosts` (none recorded where it is not named)."""
    def on(gpu: str) -> dict:
        host_cpu, host_cpus = (hosts or {}).get(gpu, (None, None))
        return {"host_cpu": host_cpu, "host_cpus": host_cpus}

    cells = {("ffn-tinyllama", "eager", 1): (40.0, 56.0), ("ffn-llama2", "eager", 1): (50.0, 75.0),
             ("ffn-tinyllama", "eager", 64): (600.0, 606.0), ("ffn-llama2", "eager", 64): (680.0, 680.0)}
    results = []
    for (model, workflow, batch), (h100, h200) in cells.items():
        results += [make_result(model, workflow, batch, "h100", "local", tflops=h100, **on("h100")),
                    make_result(model, workflow, batch, "h200", "local", tflops=h200, **on("h200"))]
    results += [make_result("tinyllama-1.1b", "torch_compile_static", 1, "h100", "local", tokens_per_s=200.0,
                            passed=True, **on("h100")),
                make_result("tinyllama-1.1b", "torch_compile_static", 1, "h200", "local", tokens_per_s=282.0,
                            passed=True, **on("h200")),
                make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=40.0, **on("h100")),
                make_result("tinyllama-1.1b", "eager", 1, "h200", "local", tokens_per_s=80.0, **on("h200"))]
    return results


def test_generation_rows_take_the_geometric_mean_over_the_models_of_a_kind():
    rows = generation_rows(compare(perf_rows(_two_generations()), "gpu", "h100", "h200"))
    by_key = {(row.kind, row.workflow, row.batch): row for row in rows}
    ffn_b1 = by_key[("synthetic", "eager", 1)]
    assert ffn_b1.cells == 2 and ffn_b1.ratio == pytest.approx(math.sqrt(1.4 * 1.5))
    assert ffn_b1.verdict == "memory-bound"
    assert by_key[("synthetic", "eager", 64)].verdict.startswith("not memory-bound")
    assert by_key[("llm", "torch_compile_static", 1)].verdict == "memory-bound"
    assert by_key[("llm", "eager", 1)].verdict.startswith("beyond the bandwidth ratio")
    assert generation_rows(compare(perf_rows(_two_generations()), "env", "local", "other")) == []


def test_a_workflow_with_a_cell_measured_in_one_process_gets_no_interval_and_a_qualified_verdict():
    results = _two_generations()
    one_process = latency([[20.0, 20.1, 19.9]])  # ffn-llama2 b1 on the h200, one process: its ratio has no interval
    results = [result.model_copy(update={"metrics": result.metrics.model_copy(update={
        "latency": one_process, "tflops": 75.0})})
        if (result.job.model, result.job.batch_size, result.provenance.gpu_tag) == ("ffn-llama2", 1, "h200")
        else result for result in results]
    rows = generation_rows(compare(perf_rows(results), "gpu", "h100", "h200"))
    ffn_b1 = next(row for row in rows if (row.kind, row.workflow, row.batch) == ("synthetic", "eager", 1))
    assert not ffn_b1.has_interval and ffn_b1.gain().endswith("(no interval)")
    # one process is no verdict (issue 31): what the figures read is said as such
    assert ffn_b1.verdict == (
        "no verdict (n=1 in a cell); the point estimate (a cell has no interval) reads: memory-bound")


def test_compare_prints_the_gain_per_workflow_beside_the_hardware_ratios(tmp_path: Path):
    store_with(tmp_path / "two.db", _two_generations())
    result = CliRunner().invoke(app, ["compare", "--db", f"sqlite:///{tmp_path / 'two.db'}", "--gpu", "h100",
                                      "--gpu", "h200"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.output.splitlines()
            if line.startswith("│")]
    # the gain carries the geometric mean of its cells' 95 % intervals
    assert any(row[:4] == ["llm", "torch_compile_static", "1", "1"] and row[4].startswith("1.41× [1.4")
               and row[5:] == ["1.43×", "1.00×", "memory-bound"] for row in rows)
    assert any(row[:3] == ["synthetic", "eager", "64"] and row[-1].startswith("not memory-bound") for row in rows)


def _compare_output(tmp_path: Path, results: list) -> str:
    """What `compare --gpu h100 --gpu h200` prints, its lines' whitespace collapsed (rich wraps long lines)."""
    store_with(tmp_path / "two.db", results)
    result = CliRunner().invoke(app, ["compare", "--db", f"sqlite:///{tmp_path / 'two.db'}", "--gpu", "h100",
                                      "--gpu", "h200"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


DIFFER = "h100 and h200 ran on different host CPUs"


def test_compare_across_gpus_names_each_sides_host_and_warns_when_they_differ(tmp_path: Path):
    output = _compare_output(tmp_path, _two_generations({"h100": XEON, "h200": EPYC}))
    assert "h100: host Intel(R) Xeon(R) Platinum 8480+, 16 CPUs" in output
    assert "h200: host AMD EPYC 9654 96-Core Processor, 32 CPUs" in output
    assert (f'{DIFFER}: the gains of host-bound workflows (eager LLM generate(), rows marked "not memory-bound" or '
            '"beyond the bandwidth ratio") may come from the host, not the GPU') in output
    # said before the tables that credit the GPU
    assert output.index(DIFFER) < output.index("h200 / h100 (GPU)")


def test_compare_across_gpus_on_the_same_host_cpu_does_not_warn(tmp_path: Path):
    output = _compare_output(tmp_path, _two_generations({"h100": XEON, "h200": XEON}))
    assert "h100: host Intel(R) Xeon(R) Platinum 8480+, 16 CPUs" in output
    assert "h200: host Intel(R) Xeon(R) Platinum 8480+, 16 CPUs" in output
    assert DIFFER not in output


def test_the_same_cpu_model_with_fewer_cpus_is_another_host():
    comparison = compare(perf_rows(_two_generations({"h100": XEON, "h200": (XEON[0], 8)})), "gpu", "h100", "h200")
    assert host_lines(comparison)[1] == "h200: host Intel(R) Xeon(R) Platinum 8480+, 8 CPUs"
    assert host_lines(comparison)[2].startswith(DIFFER)


def test_results_stored_before_the_host_cpu_was_recorded_say_unknown_and_claim_no_difference(tmp_path: Path):
    output = _compare_output(tmp_path, _two_generations({"h200": EPYC}))
    assert "h100: host unknown" in output and "h200: host AMD EPYC 9654 96-Core Processor, 32 CPUs" in output
    assert DIFFER not in output


def test_a_side_measured_on_two_hosts_names_both():
    results = _two_generations({"h100": XEON, "h200": XEON})
    results.append(make_result("ffn-small", "eager", 1, "h100", "local", tflops=1.0, host_cpu=EPYC[0],
                               host_cpus=EPYC[1]))
    lines = host_lines(compare(perf_rows(results), "gpu", "h100", "h200"))
    assert lines[0] == ("h100: hosts AMD EPYC 9654 96-Core Processor, 32 CPUs; "
                        "Intel(R) Xeon(R) Platinum 8480+, 16 CPUs")
    assert lines[2].startswith(DIFFER)


def test_host_lines_belong_to_cross_gpu_comparisons_only():
    results = _two_generations({"h100": XEON, "h200": EPYC})
    assert host_lines(compare(perf_rows(results), "env", "local", "other")) == []


def test_the_html_report_names_both_hosts_in_the_cross_gpu_section(tmp_path: Path):
    results = _two_generations({"h100": XEON, "h200": EPYC})
    page = (write_html(build_report(results, "fixture", Selection()), tmp_path / "html")).read_text()
    across = page[page.index("Across GPUs and envs"):]
    for line in ("h100: host Intel(R) Xeon(R) Platinum 8480+, 16 CPUs",
                 "h200: host AMD EPYC 9654 96-Core Processor, 32 CPUs", DIFFER):
        assert line in across
