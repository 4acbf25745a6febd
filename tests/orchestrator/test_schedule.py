"""The scheduler of a multi-GPU sweep: comparison groups on one GPU, longest first, balanced lanes, core shares, the
estimates that drive them (from the store where it has the cell), the progress line's clock, and `--plan`."""

import os
from datetime import datetime, timedelta, timezone

from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.cli.console import WorkClock
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime, answer_ok
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.sweep import schedule
from mlcbench.schema import JobSpec, Metrics, ProcessTiming, Result, Suite, SuiteEntry, Timing
from mlcbench.schema.results import TimedWindow
from tests.orchestrator.test_parallel_sweep import ONE_PROCESS, fake_gpus


def _suite() -> Suite:
    return Suite(name="pairs", description="two workflows per model and batch", entries=[
        SuiteEntry(models=["matmul-small", "ffn-small", "ffn-multilayer-small"], workflows=["eager", "torch_compile"],
                   batch_sizes=[1, 2, 4], warmup=0, repeats=1, repetition=ONE_PROCESS)])


def test_every_workflow_of_a_model_and_batch_runs_on_one_gpu_and_the_gpus_share_the_groups(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    options = sweeping.SweepOptions(suite=_suite(), env_names=["local"], workdir=tmp_path / "work",
                                    target=Target(tag="h100", device="cpu", gpus=fake_gpus(3)))
    sweeping.run(options, store, runtime_factory=lambda env, _o, _lane: SimulatedRuntime(env, lambda job: 0.01))

    gpu_of = {}
    for row in store.rows():
        gpu_of.setdefault((row.model, row.batch_size), set()).add(row.gpu_uuid)
    assert len(gpu_of) == 9 and all(len(gpus) == 1 for gpus in gpu_of.values())
    assert {gpu for gpus in gpu_of.values() for gpu in gpus} == {f"GPU-fake-{index}" for index in range(3)}


def _job(model: str, workflow: str, batch: int = 1) -> JobSpec:
    return JobSpec(model=model, workflow=workflow, batch_size=batch, warmup=0, repeats=1, precision="fp32")


def test_groups_go_longest_first_to_the_least_loaded_lane_and_a_resumed_group_stays_on_its_gpu():
    jobs = [_job("ffn-small", "eager", batch) for batch in (1, 2, 4, 8)]
    estimate = {job.job_id: seconds for job, seconds in zip(jobs, (10.0, 7.0, 6.0, 5.0))}
    groups = schedule.groups(jobs, estimate, {})
    assert [group.estimate_s for group in groups] == [10.0, 7.0, 6.0, 5.0]
    assert schedule.simulate(groups, 2) == [15.0, 13.0]  # 10+5 | 7+6: not 10+6 | 7+5
    pinned = schedule.groups(jobs, estimate, {jobs[3].job_id: 0})
    assert schedule.simulate(pinned, 2) == [15.0, 13.0] and pinned[-1].lane == 0
    assert schedule.simulate(schedule.groups(jobs, estimate, {jobs[0].job_id: 1}), 2)[1] >= 10.0


def test_lanes_sharing_a_gpu_each_stand_stopped_through_the_others_timed_windows():
    jobs = [_job("ffn-small", "eager", batch) for batch in (1, 2, 4, 8)]
    estimate = {job.job_id: seconds for job, seconds in zip(jobs, (10.0, 7.0, 6.0, 5.0))}
    windows = {job.job_id: seconds for job, seconds in zip(jobs, (2.0, 1.0, 1.0, 3.0))}
    groups = schedule.groups(jobs, estimate, {}, windows)
    # one GPU, two lanes: 10+5 (windows 2+3) | 7+6 (windows 1+1); each lane waits out the other's windows
    assert schedule.simulate(groups, 1, overlap=2) == [max(15.0 + 2.0, 13.0 + 5.0)]
    assert schedule.simulate(groups, 2, overlap=1) == [15.0, 13.0]  # a GPU each: nobody waits
    assert schedule.simulate(groups, 1, overlap=4) == [max(10.0 + 5.0, 7.0 + 6.0, 6.0 + 6.0, 5.0 + 4.0)]
    # only windows: overlapping buys nothing, their sum is the wall
    only = schedule.groups(jobs, estimate, {}, estimate)
    assert schedule.simulate(only, 1, overlap=3) == [sum(estimate.values())]


def test_a_gpu_process_is_planned_with_its_timed_window_and_the_store_refines_it():
    gpu_job = JobSpec(model="ffn-tinyllama", workflow="eager", batch_size=1, device="cuda", precision="bf16")
    typical = schedule.Estimator()
    cpu_job = gpu_job.model_copy(update={"device": "cpu"})
    assert typical.window_s(gpu_job) == schedule.WINDOW_S["synthetic"] and typical.window_s(cpu_job) == 0
    assert typical.cell_window_s(gpu_job, 3, cold_first=True) == 3 * typical.window_s(gpu_job)
    began = datetime(2026, 12, 7, tzinfo=timezone.utc)
    window = TimedWindow(opened_at=began, closed_at=began + timedelta(seconds=4.5), waited_s=0, neighbours_stopped=1)
    stored = Result(job_id=gpu_job.job_id, job=gpu_job, status="ok", metrics=Metrics(latency=Timing(
        median_ms=1, p10_ms=1, p90_ms=1, mean_ms=1, cv=0, repeats=1, method="cuda_events",
        processes=[ProcessTiming(samples_ms=[1.0], window=window)])))
    assert schedule.Estimator.from_results([stored]).window_s(gpu_job) == 4.5


def test_core_shares_are_disjoint_whole_cores_covering_the_host_and_none_for_one_lane():
    shares = schedule.core_shares(4, range(16))
    assert len(shares) == 4 and all(len(share) == 4 for share in shares)
    assert set().union(*shares) == set(range(16)) and sum(map(len, shares)) == 16
    assert all(max(share) - min(share) == 3 for share in shares)  # contiguous blocks
    assert schedule.core_shares(1, range(16)) == [None]
    assert schedule.core_shares(4, range(2)) == [None] * 4  # fewer cores than lanes: nothing to keep apart


def test_the_lanes_workers_are_pinned_and_their_compilers_held_to_the_share(tmp_path):
    lanes = []

    def factory(env, _options, lane):
        lanes.append(lane)
        return SimulatedRuntime(env, lambda job: 0.0)

    options = sweeping.SweepOptions(suite=_suite(), env_names=["local"], workdir=tmp_path / "work",
                                    target=Target(tag="h100", device="cpu", gpus=fake_gpus(2)))
    sweeping.run(options, Store(f"sqlite:///{tmp_path / 'store.db'}"), runtime_factory=factory)
    if len(os.sched_getaffinity(0)) >= 2:
        assert lanes[0].cpus and lanes[1].cpus and not lanes[0].cpus & lanes[1].cpus
        assert lanes[0].environment() == {"TORCHINDUCTOR_COMPILE_THREADS": str(len(lanes[0].cpus))}
    assert [lane.gpu_uuid for lane in lanes] == ["GPU-fake-0", "GPU-fake-1"]


def test_estimates_come_from_the_stores_history_of_the_cell_else_from_typical_costs():
    job = _job("llama2-7b", "torch_compile_decode")
    typical = schedule.Estimator()
    assert typical.process_s(job, cold=True) > 3 * typical.process_s(job, cold=False) > 0
    assert typical.cell_s(job, 3, cold_first=True) == typical.process_s(job, True) + 3 * typical.process_s(job, False)
    assert typical.cell_s(_job("ffn-small", "eager"), 3, cold_first=True) == 3 * typical.process_s(
        _job("ffn-small", "eager"), cold=False)  # eager compiles nothing: no cold process on top

    began = datetime(2026, 11, 27, tzinfo=timezone.utc)
    processes = [ProcessTiming(samples_ms=[1.0], compile_cache=cache, launched_at=began,
                               ended_at=began + timedelta(seconds=seconds))
                 for cache, seconds in (("cold", 200.0), ("warm", 20.0), ("warm", 30.0))]
    stored = Result(job_id=job.job_id, job=job, status="ok", metrics=Metrics(latency=Timing(
        median_ms=1, p10_ms=1, p90_ms=1, mean_ms=1, cv=0, repeats=3, method="cuda_events", processes=processes)))
    seen = schedule.Estimator.from_results([stored])
    assert seen.process_s(job, cold=True) == 200.0 and seen.process_s(job, cold=False) == 25.0


def test_the_clock_runs_at_the_rate_work_gets_done_and_over_the_lanes_before_any_has():
    clock = WorkClock()
    clock.planned(400.0, 4)
    assert abs(clock.remaining_s() - 100.0) < 1.0
    clock._started -= 50.0  # 50 s in, 100 s of estimated work done: 2 s of work a second
    clock.done(100.0)
    assert abs(clock.remaining_s() - 150.0) < 5.0


def test_plan_prints_the_cells_and_an_estimate_and_writes_nothing(tmp_path):
    store, work, cache = tmp_path / "store.db", tmp_path / "work", tmp_path / "cache"
    result = CliRunner().invoke(app, ["sweep", "--suite", "paper", "--gpu", "h100", "--force-gpu-tag", "--plan",
                                      "--db", str(store), "--workdir", str(work), "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    assert "estimated wall time" in result.output and "stored `unsupported` at once" in result.output
    assert "llama2-7b" in result.output
    assert not store.exists() and not work.exists() and not cache.exists()


def test_a_resume_runs_what_failed_last_time_after_every_cell_never_measured(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    started: list[str] = []

    class Started(sweeping.SweepListener):
        def process_done(self, result: Result) -> None:
            started.append(result.job.model)

    def sweep(models: list[str], crash: bool) -> None:
        suite = Suite(name="resume", description="a crashed cell and new ones", entries=[
            SuiteEntry(models=models, workflows=["eager"], batch_sizes=[1], warmup=0, repeats=1,
                       repetition=ONE_PROCESS)])
        # order seed 4 shuffles matmul-small first in a round of the four: only the retry's own turn puts it last
        options = sweeping.SweepOptions(suite=suite, env_names=["local"], workdir=tmp_path / "work",
                                        target=Target(tag="cpu", device="cpu", gpus=()), order_seed=4)
        answer = (lambda job: None) if crash else answer_ok  # None: the worker dies
        sweeping.run(options, store, Started(), runtime_factory=lambda env, _o, _lane: SimulatedRuntime(
            env, lambda job: 0.0, answer=answer))

    sweep(["matmul-small"], crash=True)
    assert [cell.status for cell in store.cells()] == ["crashed"]
    started.clear()
    sweep(["matmul-small", "ffn-small", "matmul-relu-small", "ffn-multilayer-small"], crash=False)
    assert started[-1] == "matmul-small" and sorted(started[:-1]) == ["ffn-multilayer-small", "ffn-small",
                                                                      "matmul-relu-small"]
    assert {cell.status for cell in store.cells()} == {"ok"}
