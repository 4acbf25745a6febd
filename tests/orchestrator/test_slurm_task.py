"""An array task as Slurm may run it more than once (requeued after a node failure or preemption): it redoes nothing
it stored, and skips what another sweep finished unless the sweep was a --rerun; and what `sweep --runtime slurm` refuses
before it asks Slurm anything. Simulated workers, no Slurm needed."""

from pathlib import Path

from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.runtimes.slurm import ArrayPlan, ArrayTask
from mlcbench.orchestrator.sweep.slurm import run_task
from mlcbench.orchestrator.store import Store, record
from mlcbench.orchestrator.suites import get_suite
from mlcbench.schema import Metrics, ProcessTiming, Repetition, Result, Timing


def write_plan(tmp_path: Path, rerun: bool, processes: int = 1) -> tuple[Path, ArrayPlan]:
    suite = get_suite("tiny")
    jobs = [job.model_copy(update={"repetition": Repetition(processes=processes)})
            for job in suite.expand("cpu")[:3]]
    plan = ArrayPlan(sweep_id="array-sweep", store_url=f"sqlite:///{tmp_path / 'store.db'}", suite=suite,
                     gpu_tag="cpu", force_gpu_tag=False, rerun=rerun, cache_dir=tmp_path / "cache",
                     tasks=[ArrayTask(env="local", jobs=jobs)])
    path = tmp_path / "plan.json"
    path.write_text(plan.model_dump_json())
    return path, plan


def simulated(env, options, gpu) -> SimulatedRuntime:
    return SimulatedRuntime(env, seconds=lambda job: 0.0)


def test_a_task_run_again_redoes_nothing_it_stored(tmp_path):
    path, plan = write_plan(tmp_path, rerun=False)
    first = run_task(path, 0, runtime_factory=simulated)
    again = run_task(path, 0, runtime_factory=simulated)
    # every job of the task once (the cells of a round run in a shuffled order)
    assert sorted(result.job_id for result in first.stored) == sorted(job.job_id for job in plan.tasks[0].jobs)
    assert again.stored == []
    assert len(Store(plan.store_url).rows()) == 3


def test_a_task_skips_jobs_another_sweep_finished_unless_the_sweep_is_a_rerun(tmp_path):
    for rerun in (False, True):
        folder = tmp_path / f"rerun-{rerun}"
        folder.mkdir()
        path, plan = write_plan(folder, rerun=rerun)
        done = plan.tasks[0].jobs[0]
        record(Store(plan.store_url), Result(job_id=done.job_id, job=done, status="ok"), "local", "cpu", None,
               "an-earlier-sweep", "any")
        ran = [result.job_id for result in run_task(path, 0, runtime_factory=simulated).stored]
        assert (done.job_id in ran) is rerun
        assert run_task(path, 0, runtime_factory=simulated).stored == []  # and, requeued, runs none twice


def test_a_task_adds_the_processes_a_cell_lacks_to_those_an_earlier_stopped_sweep_stored(tmp_path):
    path, plan = write_plan(tmp_path, rerun=False, processes=3)
    short = plan.tasks[0].jobs[0]
    earlier = Timing(median_ms=9.0, p10_ms=9.0, p90_ms=9.0, mean_ms=9.0, cv=0.0, repeats=1, method="perf_counter",
                     processes=[ProcessTiming(samples_ms=[9.0])])
    stopped = Result(job_id=short.job_id, job=short, status="ok", metrics=Metrics(latency=earlier))
    record(Store(plan.store_url), stopped, "local", "cpu", None, "an-earlier-sweep", "any")
    now = earlier.model_copy(update={"processes": [ProcessTiming(samples_ms=[1.0])]})
    answer = lambda job: Result(job_id=job.job_id, job=job, status="ok", metrics=Metrics(latency=now))  # noqa: E731
    runtime = lambda env, options, gpu: SimulatedRuntime(env, seconds=lambda job: 0.0, answer=answer)  # noqa: E731
    stored = {result.job_id: result for result in run_task(path, 0, runtime_factory=runtime).stored}
    assert sorted(p.samples_ms[0] for p in stored[short.job_id].metrics.latency.processes) == [1.0, 1.0, 9.0]
    assert all(len(stored[job.job_id].metrics.latency.processes) == 3 for job in plan.tasks[0].jobs)


def test_a_slurm_sweep_needs_the_nodes_gpu_named_and_takes_no_gpus_of_this_host(mlcbench):
    for arguments in (["--suite", "tiny"], ["--suite", "tiny", "--gpu", "cpu", "--gpus", "all"]):
        done = mlcbench("sweep", "--runtime", "slurm", *arguments, "--db", "postgresql+psycopg://u:p@nowhere/db")
        assert done.returncode == 2
        assert "--runtime slurm: name the nodes' GPU with --gpu TAG" in done.stderr
