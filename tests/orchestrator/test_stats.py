"""The interval code against known distributions: coverage, and what an outlier or a stray process does."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mlcbench.orchestrator.stats import combine, speedup, spread_comparison
from mlcbench.schema import ProcessTiming


def _cell(rng: np.random.Generator, center_ms: float, processes: int, calls: int, between: float,
          within: float) -> list[ProcessTiming]:
    """Log-normal process offsets around `center_ms`, log-normal calls around each process's own level."""
    levels = center_ms * np.exp(rng.normal(0, between, processes))
    return [ProcessTiming(samples_ms=list(level * np.exp(rng.normal(0, within, calls)))) for level in levels]


@pytest.mark.parametrize("processes", [3, 5, 8])
def test_the_cell_interval_covers_the_true_center_95_percent_of_the_time(processes):
    rng = np.random.default_rng(processes)
    trials = 2000
    covered = 0
    for _ in range(trials):
        timing = combine(_cell(rng, 0.05, processes, calls=20, between=0.2, within=0.1), "cuda_events", 0.02)
        covered += timing.ci_low_ms <= 0.05 <= timing.ci_high_ms
    # binomial sd at 2000 trials is 0.5 %: a bootstrap over 3 processes would sit near 75 %
    assert 0.93 <= covered / trials <= 0.97


def test_two_cells_of_one_distribution_differ_significantly_about_one_time_in_twenty():
    rng = np.random.default_rng(7)
    trials = 2000
    significant = sum(
        bool(speedup(combine(_cell(rng, 1.0, 3, 10, 0.1, 0.05), "cuda_events", 0.02),
                     combine(_cell(rng, 1.0, 4, 10, 0.1, 0.05), "cuda_events", 0.02)).significant)
        for _ in range(trials))
    assert 0.03 <= significant / trials <= 0.07


def test_a_real_difference_is_significant():
    rng = np.random.default_rng(3)
    eager = combine(_cell(rng, 2.0, 3, 20, 0.01, 0.05), "cuda_events", 0.02)
    compiled = combine(_cell(rng, 1.0, 3, 20, 0.01, 0.05), "cuda_events", 0.02)
    ratio = speedup(eager, compiled)
    assert ratio.significant and ratio.low < 2.0 < ratio.high


def test_an_injected_outlier_call_is_flagged_and_its_speedup_not_significant():
    rng = np.random.default_rng(11)
    eager = _cell(rng, 1.0, 3, 10, 0.03, 0.02)
    eager[0] = ProcessTiming(samples_ms=[*eager[0].samples_ms[:-1], 45.0])  # one slow call
    noisy = combine(eager, "cuda_events", 0.02)
    assert noisy.noisy
    ratio = speedup(noisy, combine(_cell(rng, 1.0, 3, 10, 0.03, 0.02), "cuda_events", 0.02))
    assert ratio.significant is False


def test_one_process_far_from_the_others_is_flagged_and_its_speedup_not_significant():
    near = [ProcessTiming(samples_ms=[1.0, 1.01, 0.99]) for _ in range(2)]
    stray = combine([*near, ProcessTiming(samples_ms=[2.0, 2.02, 1.98])], "cuda_events", 0.02)
    assert stray.cv < 0.05 < stray.cv_between and stray.noisy and not stray.converged
    steady = combine([ProcessTiming(samples_ms=[0.9, 0.91, 0.89]) for _ in range(3)], "cuda_events", 0.02)
    ratio = speedup(stray, steady)
    assert ratio.value > 1.3 and ratio.significant is False


def test_one_process_has_no_interval_and_no_significance():
    [process] = _cell(np.random.default_rng(0), 1.0, 1, 10, 0.1, 0.1)
    timing = combine([process], "perf_counter", 0.02)
    assert timing.ci_low_ms is None and timing.interval is None and not timing.converged
    assert speedup(timing, timing).significant is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.floats(0.01, 100), min_size=1, max_size=8), min_size=2, max_size=6),
       st.floats(0.1, 10))
def test_the_interval_holds_its_figure_and_scales_with_the_unit(samples, scale):
    timing = combine([ProcessTiming(samples_ms=s) for s in samples], "cuda_events", 0.02)
    assert timing.ci_low_ms <= timing.median_ms * (1 + 1e-9) and timing.median_ms <= timing.ci_high_ms * (1 + 1e-9)
    scaled = combine([ProcessTiming(samples_ms=[v * scale for v in s]) for s in samples], "cuda_events", 0.02)
    assert math.isclose(scaled.ci_high_ms, timing.ci_high_ms * scale, rel_tol=1e-9)
    assert speedup(timing, timing).significant is False


def _spread_trial(rng: np.random.Generator, second_between: float) -> str:
    # cells from 0.05 ms to 500 ms: the spread is relative, so the level of a cell must not matter
    cells = [(_cell(rng, center, 4, calls=10, between=0.2, within=0.05),
              _cell(rng, center, 4, calls=10, between=second_between, within=0.05))
             for center in (0.05, 0.5, 5.0, 50.0, 500.0)]
    return spread_comparison(cells).verdict


def test_the_spread_test_finds_a_difference_between_alike_sides_about_one_time_in_twenty():
    rng = np.random.default_rng(7)
    verdicts = [_spread_trial(rng, second_between=0.2) for _ in range(1000)]
    assert 0.02 <= sum(verdict != "no difference" for verdict in verdicts) / len(verdicts) <= 0.08


def test_processes_made_alike_are_found_narrower_and_processes_set_apart_wider():
    rng = np.random.default_rng(8)
    assert sum(_spread_trial(rng, second_between=0.03) == "narrower" for _ in range(200)) >= 190
    assert sum(_spread_trial(rng, second_between=0.6) == "wider" for _ in range(200)) >= 190


def test_the_spread_comparison_counts_only_cells_with_enough_processes_on_both_sides():
    rng = np.random.default_rng(9)
    full, short = _cell(rng, 1.0, 4, 5, 0.2, 0.05), _cell(rng, 1.0, 2, 5, 0.2, 0.05)
    assert spread_comparison([(full, short), (short, full)]) is None
    found = spread_comparison([(full, short), (full, full), (full, _cell(rng, 1.0, 3, 5, 0.2, 0.05))])
    assert found is not None and found.cells == 2
    identical = spread_comparison([(full, full)])
    assert identical.first_sd == identical.second_sd and identical.verdict == "no difference"


def test_the_spread_ratio_interval_covers_the_true_ratio_95_percent_of_the_time():
    rng = np.random.default_rng(10)
    covered = 0
    for _ in range(1000):
        cells = [(_cell(rng, center, 6, calls=5, between=0.2, within=0.01),
                  _cell(rng, center, 4, calls=5, between=0.1, within=0.01)) for center in (0.1, 1.0, 10.0)]
        low, high = spread_comparison(cells).ratio_interval
        covered += low <= 0.5 <= high
    assert 0.93 <= covered / 1000 <= 0.97
