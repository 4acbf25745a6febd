"""A sweep handed to a real Slurm (one node, .ci/slurm-setup.sh) and a real PostgreSQL: one job array; a task
cancelled mid-job costs only its job in flight; the next sweep re-submits only what is missing and ends with the store
a local sweep of the same jobs makes."""

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

from mlcbench.orchestrator.runtimes.slurm import PLAN_FILE, ArrayPlan, load_plan
from tests.resilience.test_kill_resume import final_rows, wait_until_no_workers

PARTITION = os.environ.get("MLCBENCH_TEST_SLURM_PARTITION")
# eager and torch_compile of one small model at batch 1: a compile takes seconds, long enough to cancel its task mid-job
JOBS = ["--suite", "smoke", "--model", "matmul-small", "--workflow", "eager,torch_compile", "--batch-size", "1",
        "--gpu", "cpu"]


def _slurm_missing() -> Optional[str]:
    if not PARTITION:
        return "MLCBENCH_TEST_SLURM_PARTITION is unset; run `eval \"$(bash .ci/slurm-setup.sh | tail -1)\"` first"
    try:
        subprocess.run(["sinfo", "--noheader", "--partition", PARTITION], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as error:
        return f"sinfo does not answer: {error}"
    return None


SLURM_MISSING = _slurm_missing()
pytestmark = [pytest.mark.slurm, pytest.mark.postgres, pytest.mark.skipif(SLURM_MISSING is not None,
                                                                          reason=SLURM_MISSING or "")]


def test_sqlite_store_is_refused_before_anything_is_written(mlcbench, tmp_path):
    done = mlcbench("sweep", *JOBS, "--runtime", "slurm", "--db", f"sqlite:///{tmp_path / 'here.db'}")
    assert done.returncode == 2
    assert "error: --runtime slurm needs a store that every node reaches" in done.stderr
    assert not (tmp_path / "here.db").exists()


def test_cancelled_task_costs_its_job_in_flight_and_the_resubmitted_rest_matches_a_local_sweep(
        mlcbench, schema_url, tmp_path):
    def submit() -> ArrayPlan:
        done = mlcbench("sweep", *JOBS, "--runtime", "slurm", "--partition", PARTITION, "--array-parallelism", "2",
                        "--db", schema_url, "--workdir", "work", "--cache-dir", "slurm-cache")
        assert done.returncode == 0, done.stderr
        [path] = [path for path in (tmp_path / "work").glob(f"slurm-*/{PLAN_FILE}") if path not in submitted]
        submitted.append(path)
        assert f"as Slurm array {load_plan(path).array_job_id} " in done.stdout
        return load_plan(path)

    def watch() -> str:
        """`mlcbench status --watch`: returns once every task has ended, with the last table."""
        done = mlcbench("status", "--workdir", "work", "--watch", timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    submitted: list[Path] = []
    first = submit()
    assert [[job.workflow for job in task.jobs] for task in first.tasks] == [["eager"], ["torch_compile"]]
    victim = next(index for index, task in enumerate(first.tasks) if task.jobs[0].workflow == "torch_compile")
    progress = _wait_for_job_start(tmp_path / "work" / f"slurm-{first.sweep_id}" / f"task-{victim:04d}")
    assert progress.read_text().split() == [first.tasks[victim].jobs[0].job_id]
    subprocess.run(["scancel", f"{first.array_job_id}_{victim}"], check=True, timeout=30)
    # the same jobs swept on this host, meanwhile, for the store to compare with
    local = subprocess.Popen([sys.executable, "-m", "mlcbench.orchestrator", "sweep", *JOBS, "--db",
                              f"sqlite:///{tmp_path / 'local.db'}", "--workdir", "local-work", "--cache-dir",
                              "local-cache"], cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    states = watch()
    assert "CANCELLED" in states and "COMPLETED" in states
    local_errors = local.communicate(timeout=300)[1]
    assert local.returncode == 0, local_errors
    reference = final_rows(f"sqlite:///{tmp_path / 'local.db'}")
    assert len(reference) == 2
    assert wait_until_no_workers(tmp_path) == [], "a worker outlived its cancelled task"

    rows = {row[0]: row[3] for row in final_rows(schema_url)}
    in_flight = first.tasks[victim].jobs[0].job_id
    assert rows.get(in_flight) in (None, "crashed")  # killed with its task: not stored, or stored as crashed
    assert {job_id: status for job_id, status in rows.items() if job_id != in_flight} == {
        row[0]: row[3] for row in reference if row[0] != in_flight}

    second = submit()
    assert [job.job_id for task in second.tasks for job in task.jobs] == [in_flight]
    again = mlcbench("sweep", *JOBS, "--runtime", "slurm", "--db", schema_url, "--workdir", "work")
    assert again.returncode == 2, "submitted again while the array still ran"
    assert f"Slurm array {second.array_job_id} (sweep {second.sweep_id}) still runs" in again.stderr
    assert "1/1 job(s) stored (ok 1); 1 task(s): COMPLETED 1" in watch()
    assert {(job_id, status) for job_id, _, _, status in final_rows(schema_url)} == {
        (job_id, status) for job_id, _, _, status in reference}


def _wait_for_job_start(task_folder: Path, within_s: float = 120) -> Path:
    """The progress file of a task's worker, once the worker has begun its first job."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        started = [path for path in task_folder.rglob("progress.txt") if path.read_text().strip()]
        if started:
            return started[0]
        time.sleep(0.05)
    raise AssertionError(f"no job started under {task_folder} within {within_s} s")
