"""Two GPU generations: each workflow's gain against the bandwidth and peak ratios, and what bounds it."""

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.reports.crossgen import Prediction, generation_rows, prediction, verdict
from mlcbench.orchestrator.reports.data import compare, perf_rows
from tests.reports.conftest import make_result, store_with

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


def _two_generations() -> list:
    # ffn TFLOPS and LLM tokens/s on each GPU: the b1 cells gain like bandwidth, the b64 FFNs like the peaks
    cells = {("ffn-tinyllama", "eager", 1): (40.0, 56.0), ("ffn-llama2", "eager", 1): (50.0, 75.0),
             ("ffn-tinyllama", "eager", 64): (600.0, 606.0), ("ffn-llama2", "eager", 64): (680.0, 680.0)}
    results = []
    for (model, workflow, batch), (h100, h200) in cells.items():
        results += [make_result(model, workflow, batch, "h100", "local", tflops=h100),
                    make_result(model, workflow, batch, "h200", "local", tflops=h200)]
    results += [make_result("tinyllama-1.1b", "torch_compile_static", 1, "h100", "local", tokens_per_s=200.0),
                make_result("tinyllama-1.1b", "torch_compile_static", 1, "h200", "local", tokens_per_s=282.0),
                make_result("tinyllama-1.1b", "eager", 1, "h100", "local", tokens_per_s=40.0),
                make_result("tinyllama-1.1b", "eager", 1, "h200", "local", tokens_per_s=80.0)]
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
