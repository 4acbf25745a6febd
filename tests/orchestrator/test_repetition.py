"""A cell is measured in several worker processes, in rounds that interleave every cell in a shuffled order; the host
combines them into one stored Result. Through the real sweep code with simulated workers."""

import json
from collections import Counter
from typing import Optional

import pytest
from pydantic import ValidationError

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.planner import measured_in_full, processes_due
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, Metrics, ProcessTiming, Repetition, Result, Suite, SuiteEntry, Timing


def _suite(repetition: Repetition) -> Suite:
    return Suite(name="grid", description="test grid", entries=[SuiteEntry(
        models=["matmul-small", "ffn-small"], workflows=["eager", "torch_compile"], batch_sizes=[1, 2], warmup=0,
        repeats=3, repetition=repetition)])


def _timed(job: JobSpec, samples: list[float]) -> Result:
    timing = Timing(median_ms=sorted(samples)[len(samples) // 2], p10_ms=min(samples), p90_ms=max(samples),
                    mean_ms=sum(samples) / len(samples), cv=0.0, repeats=len(samples), method="perf_counter",
                    processes=[ProcessTiming(samples_ms=samples)])
    return Result(job_id=job.job_id, job=job, status="ok",
                  metrics=Metrics(latency=timing, tflops=1.0 / timing.median_ms))


def _sweep(tmp_path, repetition: Repetition, answer) -> tuple[Store, sweeping.SweepReport]:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    options = sweeping.SweepOptions(suite=_suite(repetition), env_names=["local"], workdir=tmp_path / "work",
                                    target=Target(tag="cpu", device="cpu", gpus=()), order_seed=5)
    runtime = lambda env, _options, _gpu: SimulatedRuntime(env, seconds=lambda job: 0.0, answer=answer)  # noqa: E731
    return store, sweeping.run(options, store, runtime_factory=runtime)


def _jobs_per_round(tmp_path) -> dict[str, list[list[str]]]:
    rounds: dict[str, list[list[str]]] = {}
    for path in sorted((tmp_path / "work").rglob("jobs.jsonl")):
        round_name = next(part for part in path.parts if part.startswith("round-"))
        rounds.setdefault(round_name, []).append(
            [JobSpec.model_validate_json(line).job_id for line in path.read_text().splitlines()])
    return rounds


def test_every_cell_runs_once_per_round_in_a_fresh_worker_in_a_recorded_shuffled_order(tmp_path):
    calls = Counter()

    def answer(job: JobSpec) -> Result:
        calls[job.job_id] += 1
        return _timed(job, [1.0 + calls[job.job_id] / 100] * 3)

    store, report = _sweep(tmp_path, Repetition(processes=3), answer)
    rounds = _jobs_per_round(tmp_path)
    assert sorted(rounds) == ["round-00", "round-01", "round-02"]
    orders = [[job for unit in units for job in unit] for units in rounds.values()]
    assert all(sorted(order) == sorted(orders[0]) for order in orders) and len(orders[0]) == 8
    assert len({tuple(order) for order in orders}) > 1  # shuffled per round
    rows = store.rows()
    assert len(rows) == 8 and len(report.stored) == 8
    for row in rows:
        timing = row.result().metrics.latency
        assert [p.round for p in timing.processes] == [0, 1, 2]
        assert [p.position for p in timing.processes] == [order.index(row.job_id) for order in orders]
        assert timing.repeats == 9 and timing.ci_low_ms < timing.median_ms < timing.ci_high_ms
        assert row.result().provenance.order_seed == 5


def test_a_cell_gets_its_fixed_count_of_processes_however_far_apart_they_land(tmp_path):
    """No optional stopping: a wide interval does not buy a cell more processes."""
    calls = Counter()

    def answer(job: JobSpec) -> Result:
        calls[job.job_id] += 1
        level = 1.0 if job.workflow == "eager" else [1.0, 2.0][calls[job.job_id] % 2]
        return _timed(job, [level] * 3)

    store, _ = _sweep(tmp_path, Repetition(processes=3), answer)
    processes = {cell.job.workflow: len(cell.metrics.latency.processes) for cell in store.cells()}
    assert processes == {"eager": 3, "torch_compile": 3}
    converged = {cell.job.workflow: cell.metrics.latency.converged for cell in store.cells()}
    assert converged == {"eager": True, "torch_compile": False}


def test_a_process_that_crashes_after_others_ran_keeps_their_data_and_says_so(tmp_path):
    calls = Counter()

    def answer(job: JobSpec) -> Optional[Result]:
        calls[job.job_id] += 1
        if job.workflow == "torch_compile" and job.batch_size == 2 and calls[job.job_id] == 2:
            return None  # the worker dies on this cell's second process
        return _timed(job, [1.0, 1.1, 0.9])

    store, _ = _sweep(tmp_path, Repetition(processes=3), answer)
    rows = {(row.model, row.workflow, row.batch_size): row for row in store.rows()}
    assert len(rows) == 8
    crashed = rows[("matmul-small", "torch_compile", 2)].result()
    assert crashed.status == "ok" and len(crashed.metrics.latency.processes) == 1
    assert crashed.metrics.latency.lost_processes == 1 and "ended crashed" in crashed.reason
    assert len(rows[("matmul-small", "eager", 2)].result().metrics.latency.processes) == 3


def test_a_stopped_sweep_stores_the_processes_it_measured_and_the_next_adds_the_processes_they_lack(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    stop = StopRequest()

    class StopInTheSecondRound(sweeping.SweepListener):
        def round_started(self, index: int, cells: int) -> None:
            if index == 1:
                stop.after_job.set()

    def run(listener: sweeping.SweepListener, stop: StopRequest, median: float, rerun: bool = False,
            ) -> sweeping.SweepReport:
        options = sweeping.SweepOptions(suite=_suite(Repetition(processes=3)), env_names=["local"],
                                        workdir=tmp_path / f"work-{median}", rerun=rerun,
                                        target=Target(tag="cpu", device="cpu", gpus=()))
        runtime = lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0,  # noqa: E731
                                                       answer=lambda job: _timed(job, [median, median + 0.1]))
        return sweeping.run(options, store, listener, runtime_factory=runtime, stop=stop)

    first = run(StopInTheSecondRound(), stop, median=1.0)
    assert first.interrupted and len(first.stored) == 8  # every cell ran once: nothing it measured is dropped
    assert all(len(result.metrics.latency.processes) == 1 and not measured_in_full(result) for result in first.stored)
    # the next sweep runs only the 2 processes each cell lacks, and stores them with the one measured before
    second = run(sweeping.SweepListener(), StopRequest(), median=2.0)
    assert second.skipped == 0 and not second.interrupted
    assert sum(len(path.read_text().splitlines()) for path in (tmp_path / "work-2.0").rglob("jobs.jsonl")) == 8 * 2
    cells = store.cells()
    assert len(cells) == 8 and all(sorted(process.samples_ms[0] for process in result.metrics.latency.processes)
                                   == [1.0, 2.0, 2.0] for result in cells)
    assert len(store.history()) == 16  # the stopped sweep's attempts stay as history
    # --rerun measures afresh: nothing of the stored processes
    run(sweeping.SweepListener(), StopRequest(), median=3.0, rerun=True)
    assert all(sorted(process.samples_ms[0] for process in result.metrics.latency.processes) == [3.0, 3.0, 3.0]
               for result in store.cells())


def test_rounds_end_a_sweep_short_of_its_processes_without_calling_it_interrupted_and_the_next_goes_on(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")

    def run(max_rounds: Optional[int]) -> sweeping.SweepReport:
        options = sweeping.SweepOptions(suite=_suite(Repetition(processes=3)), env_names=["local"],
                                        workdir=tmp_path / f"work-{max_rounds}", max_rounds=max_rounds,
                                        target=Target(tag="cpu", device="cpu", gpus=()))
        runtime = lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0,  # noqa: E731
                                                       answer=lambda job: _timed(job, [1.0, 1.1]))
        return sweeping.run(options, store, runtime_factory=runtime)

    first = run(max_rounds=2)
    assert not first.interrupted and first.cells_short == 8
    assert sorted({folder.name for folder in (tmp_path / "work-2").rglob("round-*")}) == ["round-00", "round-01"]
    assert all(len(cell.metrics.latency.processes) == 2 for cell in store.cells())
    rest = run(max_rounds=None)
    assert not rest.interrupted and rest.cells_short == 0
    assert all(len(cell.metrics.latency.processes) == 3 for cell in store.cells())


def test_a_job_spec_stored_under_the_adaptive_rule_loads_with_its_job_id_and_runs_its_fixed_count():
    """Stored by the landed main before the fixed count (e5b902a): max_processes 5 loads as a stored result's job
    and keeps its identity, so that resume and compare still find its cells; a sweep runs `processes` of it. As a job
    file's line it is refused, naming what replaces the knob."""
    stored = ('{"schema_version":1,"model":"ffn-small","workflow":"eager","precision":"fp32","batch_size":1,'
              '"input_len":32,"output_len":32,"warmup":3,"repeats":10,"repetition":{"processes":3,"max_processes":5,'
              '"target":0.02,"max_s":600.0},"timeout_s":1200.0,"device":"cuda","seed":0,"options":{"compile_mode":null,'
              '"io_binding":true,"min_block_size":null,"fp32_accumulation":null},"model_path":null}')
    job = Result.model_validate({"job_id": "418cc9e3909157dc", "job": json.loads(stored), "status": "ok"}).job
    assert job.job_id == "418cc9e3909157dc" and job.retired_repetition.max_processes == 5
    assert processes_due(job, []) == 3
    with pytest.raises(ValidationError, match="max_processes: retired: .*set processes"):
        JobSpec.model_validate_json(stored)
