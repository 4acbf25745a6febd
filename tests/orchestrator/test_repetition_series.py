"""One program per cell: cold processes (compiled into an empty cache) and warm ones are separate series, a cell's
check covers every process, and a cell never mixes GPU, host, code revision or library versions (a process that would
starts a new attempt). Through the real sweep code with simulated workers."""

from collections import Counter
from typing import Optional

import numpy as np
import pytest

from mlcbench.orchestrator import stats, sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import measured_in_full, processes_due
from mlcbench.orchestrator.reports.sections.costs import cost_rows
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store, provenance
from mlcbench.schema import (Correctness, GpuInfo, JobSpec, Metrics, ProcessTiming, Provenance, Repetition, Result,
                             Suite, SuiteEntry, Timing)

THREE = Repetition(processes=3)


def _suite(workflows: tuple[str, ...] = ("torch_compile",)) -> Suite:
    return Suite(name="grid", description="test grid", entries=[SuiteEntry(
        models=["ffn-small"], workflows=list(workflows), batch_sizes=[1], warmup=0, repeats=3, repetition=THREE)])


def _process(job: JobSpec, level: float, cache: Optional[str], compile_s: float = 1.0, host: str = "node-a",
             gpu: Optional[str] = None, passed: bool = True, device_ms: Optional[float] = None,
             step_ms: Optional[float] = None) -> Result:
    samples = [level * factor for factor in (0.99, 1.0, 1.01)]
    timing = Timing(median_ms=level, p10_ms=min(samples), p90_ms=max(samples), mean_ms=level, cv=0.01, repeats=3,
                    method="perf_counter", processes=[ProcessTiming(
                        samples_ms=samples, device_samples_ms=[device_ms] * 3 if device_ms else [],
                        device_method="cuda_graph_replay_queued" if device_ms else None, step_ms=step_ms)])
    check = Correctness(method="outputs", tolerance=0.01, passed=passed, rel_l2_error=0.001 if passed else 0.5)
    return Result(job_id=job.job_id, job=job, status="ok", correctness=check,
                  metrics=Metrics(latency=timing, tflops=1.0 / level, compile_s=compile_s, compile_cache=cache,
                                  compiler_import_s=compile_s / 10),
                  provenance=Provenance(hostname=host, packages={"torch": "2.11.0"}, python="3.11.7",
                                        gpu=GpuInfo(name="NVIDIA H100", uuid=gpu) if gpu else None))


def _sweep(tmp_path, store: Store, answer, name: str = "work", stop: Optional[StopRequest] = None,
           listener: Optional[sweeping.SweepListener] = None, workflows: tuple[str, ...] = ("torch_compile",),
           ) -> sweeping.SweepReport:
    options = sweeping.SweepOptions(suite=_suite(workflows), env_names=["local"], workdir=tmp_path / name,
                                    target=Target(tag="cpu", device="cpu", gpus=()), order_seed=3)
    runtime = lambda env, _options, _gpu: SimulatedRuntime(env, seconds=lambda job: 0.0, answer=answer)  # noqa: E731
    return sweeping.run(options, store, listener, runtime_factory=runtime, stop=stop)


def test_cold_and_warm_processes_of_different_programs_are_two_series_and_the_figure_is_the_warm_one(tmp_path):
    calls = Counter()
    warm_levels = [1.0, 1.02, 0.98]

    def answer(job: JobSpec) -> Result:
        calls[job.job_id] += 1
        if calls[job.job_id] == 1:  # compiles into the empty cache: another program, twice as slow
            return _process(job, 2.0, "cold", compile_s=20.0)
        return _process(job, warm_levels[calls[job.job_id] - 2], "warm", compile_s=5.0 + calls[job.job_id])

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    _sweep(tmp_path, store, answer)
    [cell] = store.cells()
    timing = cell.metrics.latency
    # the count is of one program: the cold first process comes on top of the 3 warm ones
    assert sum(calls.values()) == 4 and measured_in_full(cell)
    assert timing.series == "warm"
    assert [p.compile_cache for p in timing.processes] == ["warm"] * 3
    assert [p.compile_cache for p in timing.other_series] == ["cold"]
    assert timing.median_ms == pytest.approx(float(np.exp(np.mean(np.log(warm_levels)))), rel=1e-6)
    assert timing.ci_high_ms < 2.0  # the cold process is not in the interval either
    assert cell.metrics.tflops == pytest.approx(1.0 / timing.median_ms, rel=1e-6)
    cold, warm = cell.metrics.compile_cold, cell.metrics.compile_warm
    assert (cold.n, cold.median_s) == (1, 20.0)
    assert (warm.n, warm.min_s, warm.max_s, warm.median_s) == (3, 7.0, 9.0, 8.0)
    # each process's import of the compiler is its own, in either series
    assert [p.compiler_import_s for p in timing.other_series + timing.processes] == pytest.approx([2.0, 0.7, 0.8, 0.9])
    [costs] = cost_rows([cell])
    assert costs.compiler_import_s_median == pytest.approx(0.85)


def test_cold_processes_that_run_the_warm_program_join_its_figure():
    rng = np.random.default_rng(1)

    def processes(cache: str, levels) -> list[ProcessTiming]:
        return [ProcessTiming(samples_ms=list(level * np.exp(rng.normal(0, 0.01, 5))), compile_cache=cache)
                for level in levels]

    warm = processes("warm", [1.0, 1.05, 0.95])
    pooled = stats.combine_cell([*processes("cold", [1.01]), *warm], "cuda_events", 0.02)
    assert pooled.series == "pooled" and len(pooled.processes) == 4 and pooled.other_series == []
    apart = stats.combine_cell([*processes("cold", [1.6, 1.65]), *warm], "cuda_events", 0.02)
    assert apart.series == "warm" and len(apart.processes) == 3 and len(apart.other_series) == 2
    # one process a side: no spread to test against, never pooled
    assert stats.combine_cell([*processes("cold", [1.0]), warm[0]], "cuda_events", 0.02).series == "warm"
    assert stats.combine_cell(processes("cold", [1.0, 1.1]), "cuda_events", 0.02).series == "cold"
    assert stats.combine_cell(processes("warm", [1.0]), "cuda_events", 0.02).series == "warm"
    assert stats.combine_cell([ProcessTiming(samples_ms=[1.0])], "cuda_events", 0.02).series is None


def test_the_program_test_reads_device_time_where_every_process_has_it():
    """A sub-millisecond cell: the cold process's whole call is slower (the host's launch cost moves it), its GPU time
    is the warm ones'."""
    def process(cache: str, whole_ms: float, device_ms: float) -> ProcessTiming:
        return ProcessTiming(samples_ms=[whole_ms * f for f in (0.99, 1.0, 1.01)], compile_cache=cache,
                             device_samples_ms=[device_ms * f for f in (0.999, 1.0, 1.001)],
                             device_method="cuda_graph_replay_queued")

    warm = [process("warm", 0.20, 0.100), process("warm", 0.21, 0.101), process("warm", 0.19, 0.099)]
    cold = process("cold", 0.40, 0.1005)
    assert stats.combine_cell([cold, *warm], "cuda_events", 0.02).series == "pooled"
    # the same whole calls without a device time: two programs
    whole_only = [p.model_copy(update={"device_samples_ms": [], "device_method": None}) for p in (cold, *warm)]
    assert stats.combine_cell(whole_only, "cuda_events", 0.02).series == "warm"
    # and a cold process whose GPU time differs is set apart on it
    assert stats.combine_cell([process("cold", 0.20, 0.15), *warm], "cuda_events", 0.02).series == "warm"


def test_a_verdict_counts_the_processes_of_one_program_not_a_cold_one_pooled_in():
    from mlcbench.orchestrator.reports.data import no_verdict, processes_of

    rng = np.random.default_rng(1)
    job = JobSpec(model="ffn-small", workflow="torch_compile", precision="fp32", batch_size=1)
    pooled = stats.combine_cell(
        [ProcessTiming(samples_ms=list(level * np.exp(rng.normal(0, 0.01, 5))), compile_cache=cache)
         for level, cache in ((1.01, "cold"), (1.0, "warm"), (1.05, "warm"))], "cuda_events", 0.02)
    result = Result(job_id=job.job_id, job=job, status="ok",
                    correctness=Correctness(method="outputs", tolerance=0.01, passed=True, rel_l2_error=0.001),
                    metrics=Metrics(latency=pooled, tflops=1.0))
    assert pooled.series == "pooled" and processes_of(result) == 3
    assert no_verdict(result) == "n=2"  # two warm processes asked for: no verdict, however the cold one pooled


def test_same_program_rejects_about_one_in_twenty_of_one_distribution():
    rng = np.random.default_rng(5)
    trials = 2000
    rejected = 0
    for trial in range(trials):
        cold_n = 1 + trial % 3
        levels = np.exp(rng.normal(0, 0.2, cold_n + 3))
        cold = [ProcessTiming(samples_ms=[level]) for level in levels[:cold_n]]
        warm = [ProcessTiming(samples_ms=[level]) for level in levels[cold_n:]]
        rejected += not stats.same_program(cold, warm)
    assert 0.03 <= rejected / trials <= 0.07


def test_device_and_step_time_and_the_check_of_every_process_are_combined(tmp_path):
    calls = Counter()

    def answer(job: JobSpec) -> Result:
        calls[job.job_id] += 1
        n = calls[job.job_id]
        return _process(job, 1.0, None, device_ms=[0.5, 0.4, 0.6][n - 1], step_ms=[2.0, 2.2, 1.8][n - 1],
                        passed=n != 2)

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    _sweep(tmp_path, store, answer, workflows=("eager",))
    [cell] = store.cells()
    timing = cell.metrics.latency
    assert timing.series is None and len(timing.processes) == 3
    assert timing.device_median_ms == pytest.approx(float(np.exp(np.mean(np.log([0.5, 0.4, 0.6])))))
    assert timing.device_ci_low_ms < timing.device_median_ms < timing.device_ci_high_ms
    assert timing.device_method == "cuda_graph_replay_queued"
    assert timing.step_median_ms == pytest.approx(float(np.exp(np.mean(np.log([2.0, 2.2, 1.8])))))
    assert timing.step_ci_low_ms < timing.step_median_ms < timing.step_ci_high_ms
    check = cell.correctness
    assert not check.passed and (check.processes_checked, check.processes_failed) == (3, 1)
    assert check.rel_l2_error == 0.5 and "1 of 3 processes" in cell.reason
    assert [p.correctness.passed for p in timing.processes] == [True, False, True]


def _stopped_after_one_process(tmp_path, store: Store, answer) -> Result:
    stop = StopRequest()

    class StopAfterTheFirstProcess(sweeping.SweepListener):
        def process_done(self, result: Result) -> None:
            stop.after_job.set()

    _sweep(tmp_path, store, answer, name="stopped", stop=stop, listener=StopAfterTheFirstProcess(),
           workflows=("eager",))
    [partial] = store.cells()
    assert len(partial.metrics.latency.processes) == 1 and not measured_in_full(partial)
    return partial


@pytest.mark.parametrize("change", ["gpu", "host", "revision", "library", "startup"])
def test_a_resume_on_another_gpu_host_revision_library_or_startup_starts_a_new_attempt(tmp_path, monkeypatch, change):
    before = dict(gpu="GPU-aaaa", host="node-a")
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv(provenance.GIT_REV_VARIABLE, "rev-one")
    provenance.git_revision.cache_clear()
    partial = _stopped_after_one_process(tmp_path, store, lambda job: _process(job, 5.0, None, **before))
    assert partial.provenance.git_rev == "rev-one" and partial.provenance.hostname == "node-a"

    after = dict(before)
    if change == "gpu":
        after["gpu"] = "GPU-bbbb"
    elif change == "host":
        after["host"] = "node-b"
    elif change == "revision":
        monkeypatch.setenv(provenance.GIT_REV_VARIABLE, "rev-two")
        provenance.git_revision.cache_clear()

    def answer(job: JobSpec) -> Result:
        result = _process(job, 1.0, None, **after)
        if change == "library":
            result = result.model_copy(update={"provenance": result.provenance.model_copy(update={
                "packages": {"torch": "2.12.0"}})})
        if change == "startup":  # the stored process started as a new interpreter, this one forked
            result = result.model_copy(update={"provenance": result.provenance.model_copy(update={
                "startup": "fork"})})
        return result

    try:
        _sweep(tmp_path, store, answer, name="resumed", workflows=("eager",))
    finally:
        provenance.git_revision.cache_clear()
    [cell] = store.cells()
    # three processes of the new setup only: the stored one is not mixed in, and stays as the history
    assert [process.samples_ms[1] for process in cell.metrics.latency.processes] == [1.0, 1.0, 1.0]
    assert len(store.history()) == 2 and store.history()[0].metrics.latency.median_ms == pytest.approx(5.0)


def test_a_resume_on_the_same_setup_tops_up_the_stored_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(provenance.GIT_REV_VARIABLE, "rev-one")
    provenance.git_revision.cache_clear()
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        _stopped_after_one_process(tmp_path, store, lambda job: _process(job, 5.0, None, gpu="GPU-aaaa"))
        _sweep(tmp_path, store, lambda job: _process(job, 1.0, None, gpu="GPU-aaaa"), name="resumed",
               workflows=("eager",))
    finally:
        provenance.git_revision.cache_clear()
    [cell] = store.cells()
    assert sorted(process.samples_ms[1] for process in cell.metrics.latency.processes) == [1.0, 1.0, 5.0]


def test_the_count_is_of_one_program():
    job = _suite().expand("cpu")[0]
    cold, warm = ProcessTiming(samples_ms=[1.0], compile_cache="cold"), ProcessTiming(samples_ms=[1.0],
                                                                                      compile_cache="warm")
    assert processes_due(job, []) == 3
    assert processes_due(job, [cold]) == 2  # at the least: 2 more cold ones would make the cold series
    assert processes_due(job, [cold, warm]) == 2
    assert processes_due(job, [cold, warm, warm]) == 1
    assert processes_due(job, [cold, cold, cold]) == 0  # a workflow whose processes all compile cold
    assert processes_due(job, [cold, warm, warm, warm]) == 0


def test_a_cell_is_the_attempt_with_all_its_processes_before_a_later_one_still_short_of_them(tmp_path):
    """A --rerun killed after one process must not hide the complete attempt before it (issue 31: the store kept a
    one-process attempt of four)."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    _sweep(tmp_path, store, lambda job: _process(job, 1.0, None), workflows=("eager",))
    stop = StopRequest()

    class StopAfterTheFirstProcess(sweeping.SweepListener):
        def process_done(self, result: Result) -> None:
            stop.after_job.set()

    options = sweeping.SweepOptions(suite=_suite(("eager",)), env_names=["local"], workdir=tmp_path / "rerun",
                                    target=Target(tag="cpu", device="cpu", gpus=()), rerun=True)
    runtime = lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0,  # noqa: E731
                                                   answer=lambda job: _process(job, 9.0, None))
    sweeping.run(options, store, StopAfterTheFirstProcess(), runtime_factory=runtime, stop=stop)
    assert len(store.history()) == 2
    [cell] = store.cells()
    assert len(cell.metrics.latency.processes) == 3 and cell.metrics.latency.median_ms == pytest.approx(1.0)
