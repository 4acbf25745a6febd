"""Several GPUs on one host: one worker per GPU at once, jobs shared through a queue, results tagged with the GPU
that ran them; stop requests; all through the real sweep code with simulated workers of known job lengths."""

from collections import Counter

import pytest

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.gpu import Target, resolve_target, select_gpus
from mlcbench.orchestrator.planner import measured_in_full
from mlcbench.orchestrator.runtimes.base import StopRequest
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, GpuInfo, Provenance, Repetition, Result, Suite, SuiteEntry

JOB_S = 0.1
ONE_PROCESS = Repetition(processes=1)


def fake_gpus(count: int, name: str = "NVIDIA H100 80GB HBM3") -> tuple[GpuInfo, ...]:
    return tuple(GpuInfo(name=name, uuid=f"GPU-fake-{index}", index=index, compute_capability="9.0")
                 for index in range(count))


def grid_suite(models: int = 4, batches: int = 4) -> Suite:
    names = ["matmul-small", "matmul-relu-small", "ffn-small", "ffn-multilayer-small"][:models]
    return Suite(name="grid", description="test grid", entries=[
        SuiteEntry(models=names, workflows=["eager"], batch_sizes=[1, 2, 4, 8, 16, 32][:batches], warmup=0, repeats=1,
                   repetition=ONE_PROCESS)])


def options(tmp_path, gpus: int, suite: Suite, worker_scope: sweeping.WorkerScope = "cell") -> sweeping.SweepOptions:
    return sweeping.SweepOptions(suite=suite, env_names=["local"], workdir=tmp_path / "work",
                                 target=Target(tag="h100", device="cpu", gpus=fake_gpus(gpus)), worker_scope=worker_scope)


def simulated(isolate_groups: bool = False, runtimes: list | None = None):
    def factory(env, _options, _gpu):
        runtime = SimulatedRuntime(env, seconds=lambda job: JOB_S, isolate_groups=isolate_groups)
        if runtimes is not None:
            runtimes.append(runtime)
        return runtime

    return factory


def test_jobs_are_shared_across_gpus_and_each_result_names_the_gpu_that_ran_it(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    report = sweeping.run(options(tmp_path, 4, grid_suite()), store, runtime_factory=simulated())

    rows = store.rows()
    assert len(rows) == 16 and len({row.job_id for row in rows}) == 16
    assert all(row.status == "ok" for row in rows)
    assert all(row.gpu_uuid == f"GPU-fake-{row.gpu_index}" for row in rows)
    assert all(row.result().provenance.gpu.uuid == row.gpu_uuid for row in rows)
    per_gpu = Counter(row.gpu_index for row in rows)
    assert set(per_gpu) == {0, 1, 2, 3}
    assert _most_at_once([row.result().provenance for row in rows]) >= 2  # the GPUs' workers ran side by side
    assert len({row.sweep_id for row in rows}) == 1 and not report.interrupted


def _most_at_once(provenances) -> int:
    events = sorted([(p.started_at, 1) for p in provenances] + [(p.ended_at, -1) for p in provenances])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def test_isolating_runtime_gets_one_worker_per_model_workflow_group_spread_over_gpus(tmp_path):
    runtimes: list[SimulatedRuntime] = []
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    sweeping.run(options(tmp_path, 2, grid_suite(), "round"), store, runtime_factory=simulated(True, runtimes))

    job_files = sorted((tmp_path / "work").rglob("jobs.jsonl"))
    groups_per_gpu = [set(), set()]
    for path in job_files:
        jobs = [JobSpec.model_validate_json(line) for line in path.read_text().splitlines()]
        assert len({(job.model, job.workflow) for job in jobs}) == 1  # a worker runs one (model, workflow) group
        groups_per_gpu[int(path.parts[-4].endswith("gpu1"))].add((jobs[0].model, jobs[0].workflow))
    # one worker per group a GPU has in its round; the 16 comparison groups (model x batch) spread over both GPUs
    assert [runtime.workers_started for runtime in runtimes] == [len(groups) for groups in groups_per_gpu]
    assert {row.gpu_index for row in store.rows()} == {0, 1}


def test_a_stop_request_lets_each_job_in_flight_end_and_be_stored_then_a_rerun_finishes_the_rest(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    stop = StopRequest()

    class StopAtFirstResult(sweeping.SweepListener):
        def job_done(self, result: Result) -> None:
            stop.after_job.set()

    first = sweeping.run(options(tmp_path, 2, grid_suite()), store, StopAtFirstResult(),
                         runtime_factory=simulated(), stop=stop)
    assert first.interrupted
    # the first cell, and at most the one the other GPU had in flight
    assert 1 <= len(store.rows()) <= 2
    second = sweeping.run(options(tmp_path, 2, grid_suite()), store, runtime_factory=simulated())
    assert not second.interrupted and second.skipped == sum(measured_in_full(result) for result in first.stored)
    rows = store.rows()
    assert len(rows) == 16 and len({row.job_id for row in rows}) == 16


def test_a_stop_request_during_the_last_job_interrupts_nothing(tmp_path):
    """The job in flight ends and is stored, and nothing was left to run: the sweep is complete, not interrupted (its
    exit code 0, no "to resume" line)."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    stop = StopRequest()

    class StopAtTheStart(sweeping.SweepListener):
        def job_started(self, job) -> None:
            stop.after_job.set()

    report = sweeping.run(options(tmp_path, 1, grid_suite(models=1, batches=1)), store, StopAtTheStart(),
                          runtime_factory=simulated(), stop=stop)
    assert stop.requested and not report.interrupted and len(store.rows()) == 1


def test_a_stop_now_drops_the_jobs_in_flight(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    stop = StopRequest()
    stop.now.set()
    report = sweeping.run(options(tmp_path, 2, grid_suite()), store, runtime_factory=simulated(), stop=stop)
    assert report.interrupted and store.rows() == []


def test_a_runtime_failing_in_a_worker_thread_fails_the_sweep(tmp_path):
    class Broken(SimulatedRuntime):
        def start_worker(self, files):
            raise UsageError("engine went away")

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    with pytest.raises(UsageError, match="engine went away"):
        sweeping.run(options(tmp_path, 2, grid_suite()), store,
                     runtime_factory=lambda env, _o, _g: Broken(env, seconds=lambda job: JOB_S))


def test_the_hosts_gpu_record_wins_and_the_workers_extra_fields_stay():
    from mlcbench.orchestrator.sweep.cells import on_gpu as _on_gpu
    from mlcbench.orchestrator.planner import expand, Filters

    job = expand(grid_suite(1, 1), Target("cpu", "cpu", ()), Filters())[0]
    host = fake_gpus(3)[2]
    seen_by_worker = GpuInfo(name="NVIDIA H100", uuid="GPU-fake-2", index=0, sm_clock_mhz=1980)
    result = Result(job_id=job.job_id, job=job, status="ok", provenance=Provenance(gpu=seen_by_worker))
    gpu = _on_gpu(result, host).provenance.gpu
    assert (gpu.index, gpu.uuid, gpu.name, gpu.sm_clock_mhz) == (2, "GPU-fake-2", host.name, 1980)
    assert _on_gpu(result, None) is result


def test_gpus_option_selects_indices_all_or_the_first_gpu_by_default():
    gpus = list(fake_gpus(4))
    assert select_gpus(None, gpus) == gpus[:1]
    assert select_gpus("all", gpus) == gpus
    assert select_gpus("2, 0,2", gpus) == [gpus[2], gpus[0]]
    with pytest.raises(UsageError, match="'7' is not a GPU index"):
        select_gpus("0,7", gpus)
    with pytest.raises(UsageError, match="mixes GPU models"):
        select_gpus("all", [gpus[0], GpuInfo(name="NVIDIA GeForce RTX 4090", uuid="GPU-x", index=1)])
    with pytest.raises(UsageError, match="no GPU"):
        select_gpus("0", [])
    target = resolve_target(None, gpus, gpus="1,3")
    assert target.tag == "h100" and [gpu.index for gpu in target.gpus] == [1, 3]


def test_workflows_that_take_over_their_process_never_share_a_worker_with_other_workflows(tmp_path):
    suite = Suite(name="mixed", description="test grid", entries=[
        SuiteEntry(models=["matmul-small", "ffn-small"], workflows=["eager", "torchax", "torch_compile"],
                   batch_sizes=[1, 2], warmup=0, repeats=1, repetition=ONE_PROCESS)])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    sweeping.run(options(tmp_path, 1, suite, "round"), store, runtime_factory=simulated())

    workflows_per_worker = [{line.split('"workflow":"')[1].split('"')[0] for line in path.read_text().splitlines()}
                            for path in sorted((tmp_path / "work").rglob("jobs.jsonl"))]
    assert {"torchax"} in workflows_per_worker
    assert all(workflows == {"torchax"} or "torchax" not in workflows for workflows in workflows_per_worker)
    assert len(store.rows()) == 12


def test_a_cell_runs_on_the_gpu_of_the_eager_cell_its_speedup_pairs_with(tmp_path):
    suite = Suite(name="pairs", description="eager and compiled", entries=[
        SuiteEntry(models=["matmul-small", "ffn-small"], workflows=["eager", "torch_compile"], batch_sizes=[1, 2, 4],
                   warmup=0, repeats=1, repetition=Repetition(processes=2))])
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    sweeping.run(options(tmp_path, 4, suite), store, runtime_factory=simulated())
    by_pair: dict[tuple, set[str]] = {}
    for row in store.rows():  # every process of both sweeps' cells
        by_pair.setdefault((row.model, row.batch_size), set()).add(row.gpu_uuid)
    assert len(by_pair) == 6 and all(len(uuids) == 1 for uuids in by_pair.values())
    assert len(set.union(*by_pair.values())) == 4  # the pairs spread over every GPU
