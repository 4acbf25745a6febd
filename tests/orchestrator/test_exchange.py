"""The host reads back exactly the results a worker writes: lines end at b"\n" only (JSON Lines), whatever a
result's text holds."""

from pathlib import Path

from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.schema import EnvSpec, JobSpec, Result
from mlcbench.schema.protocol import DEFAULT_CACHE_DIR, WorkerArgs, worker_command
from tests.conftest import results_of

LOCAL = EnvSpec(name="local", runtime="local", workflows=["*"])
# characters that str.splitlines() takes for line ends, though JSON leaves them unescaped inside a string
LINE_BREAKS_OF_STR = "\u2028\u2029\x85\x1c\x1d\x1e\x0b\x0c"


def job(batch_size: int) -> JobSpec:
    return JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=batch_size, device="cpu")


def test_a_reason_holding_a_unicode_line_separator_comes_back_as_one_result_for_its_own_job(tmp_path):
    jobs = [job(1), job(2)]
    written = {jobs[0].job_id: f"first{LINE_BREAKS_OF_STR}reason", jobs[1].job_id: "second"}
    runtime = SimulatedRuntime(LOCAL, seconds=lambda _: 0.0, answer=lambda spec: Result.without_run(
        spec, "unsupported", written[spec.job_id]))
    results = results_of(runtime, jobs, tmp_path / "work")
    assert [(r.job_id, r.status, r.reason) for r in results] == [
        (jobs[0].job_id, "unsupported", written[jobs[0].job_id]), (jobs[1].job_id, "unsupported", "second")]
    assert runtime.workers_started == 1


def test_the_worker_parses_the_command_line_the_host_builds_into_the_same_arguments():
    command = worker_command("python", "/mlcbench/work", "/mlcbench/cache", calibrate=True)
    assert command[:4] == ["python", "-m", "mlcbench.workers", "run"]
    assert WorkerArgs.parse(command[3:]) == WorkerArgs(
        jobs=Path("/mlcbench/work/jobs.jsonl"), results=Path("/mlcbench/work/results.jsonl"),
        progress=Path("/mlcbench/work/progress.txt"), cache_dir=Path("/mlcbench/cache"),
        calibration=Path("/mlcbench/work/calibration.json"))
    assert WorkerArgs.parse(["run", "--jobs", "j", "--results", "r"]).cache_dir == DEFAULT_CACHE_DIR
