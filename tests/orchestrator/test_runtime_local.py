import os
import re
import signal
import time
from pathlib import Path

import pytest

from mlcbench.orchestrator.runtimes.follower import describe_exit, parse_result_line, run_jobs
from mlcbench.orchestrator.runtimes.local import LocalRuntime
from mlcbench.schema import EnvSpec, JobSpec, Result
from tests.conftest import results_of

LOCAL = EnvSpec(name="local", runtime="local", workflows=["*"])


def job(workflow: str, **overrides) -> JobSpec:
    return JobSpec(**{"model": "matmul-small", "workflow": workflow, "precision": "fp32", "batch_size": 1,
                      "device": "cpu", "warmup": 0, "repeats": 2, **overrides})


def run(tmp_path, jobs: list[JobSpec]) -> list[Result]:
    runtime = LocalRuntime(LOCAL, cache_dir=tmp_path / "cache", extra_env={"MLCBENCH_TEST_FAULTS": "1"})
    return results_of(runtime, jobs, tmp_path / "work")


def test_worker_killed_mid_job_keeps_finished_results_and_records_the_crash(tmp_path):
    jobs = [job("eager"), job("fault-kill"), job("eager", batch_size=2)]
    results = run(tmp_path, jobs)
    assert [r.job_id for r in results] == [j.job_id for j in jobs]
    assert [r.status for r in results] == ["ok", "crashed", "ok"]
    crashed = results[1]
    assert crashed.exit_code == -9 and "SIGKILL" in crashed.reason
    # when the lost job ran: a sweep's wall-time breakdown counts it
    assert results[0].provenance.ended_at <= crashed.provenance.started_at <= crashed.provenance.ended_at
    # a fresh worker ran the last job: two exchange folders
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["worker-000", "worker-001"]


class StoppingRuntime(LocalRuntime):
    """Its first worker is SIGSTOPped as soon as it starts (hangs before its first job)."""

    def start_worker(self, files):
        worker = super().start_worker(files)
        if files.folder.name == "worker-000":
            os.kill(worker._process.pid, signal.SIGSTOP)
        return worker


def test_a_worker_that_hangs_before_its_first_job_times_out_and_a_fresh_one_runs_the_rest(tmp_path):
    results: list[Result] = []
    jobs = [job("eager", timeout_s=2), job("eager", batch_size=2)]
    begin = time.monotonic()
    run_jobs(StoppingRuntime(LOCAL, cache_dir=tmp_path / "cache"), jobs, tmp_path / "work", results.append)
    assert [r.status for r in results] == ["timeout", "ok"]
    assert "2 s timeout (the worker never started it)" in results[0].reason
    assert time.monotonic() - begin < 60


def test_segfault_is_a_crash_with_its_signal_and_the_python_stack_in_the_log_tail(tmp_path):
    results = run(tmp_path, [job("fault-segfault")])
    assert results[0].status == "crashed" and "SIGSEGV" in results[0].reason
    assert "Fatal Python error: Segmentation fault" in results[0].log_tail
    assert "faults.py" in results[0].log_tail


def test_a_model_that_does_not_fit_is_an_oom_result_and_the_next_job_runs_in_the_same_worker(tmp_path):
    results = run(tmp_path, [job("fault-oom"), job("eager")])
    assert [r.status for r in results] == ["oom", "ok"]
    assert "CUDA out of memory" in results[0].reason and "OutOfMemoryError" in results[0].error
    assert len(list((tmp_path / "work").iterdir())) == 1  # no crash: one worker ran both


def test_an_oom_result_carries_the_allocators_peak_and_the_devices_memory(monkeypatch):
    import torch

    from mlcbench.workers.runner import _memory_after_failure

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (1 << 20, 80 << 30))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 79 << 30)
    metrics = _memory_after_failure(job("eager", device="cuda"))
    assert metrics.torch_peak_mem_bytes == 79 << 30
    assert metrics.settings == {"device_free_bytes": 1 << 20, "device_total_bytes": 80 << 30}


def test_job_over_its_timeout_is_stored_as_timeout_and_the_next_job_runs(tmp_path):
    results = run(tmp_path, [job("fault-hang", timeout_s=3), job("eager")])
    assert [r.status for r in results] == ["timeout", "ok"]
    assert "3 s timeout" in results[0].reason


def test_fault_workflows_are_unknown_without_the_test_switch(tmp_path):
    runtime = LocalRuntime(LOCAL, cache_dir=tmp_path / "cache")
    results: list[Result] = []
    run_jobs(runtime, [job("fault-kill")], tmp_path / "work", results.append)
    assert results[0].status == "unsupported"


def test_unparsable_result_line_becomes_a_failed_result_with_the_raw_text():
    spec = job("eager")
    result = parse_result_line('{"job_id": "x", "status": "ok"', spec)
    assert result.status == "failed" and result.job_id == spec.job_id
    assert result.error == '{"job_id": "x", "status": "ok"'


def test_exit_descriptions():
    assert describe_exit(3) == "exit code 3"
    assert "SIGSEGV" in describe_exit(-11)
    assert "SIGKILL" in describe_exit(137) and "OOM" in describe_exit(137)


def test_the_first_worker_measures_the_devices_ceilings_before_its_jobs(tmp_path):
    runtime = LocalRuntime(LOCAL, cache_dir=tmp_path / "cache")
    results, ceilings = [], []
    run_jobs(runtime, [job("eager")], tmp_path / "work", results.append, on_calibration=ceilings.append)
    [ceiling] = ceilings
    assert [r.status for r in results] == ["ok"] and ceiling.error is None and ceiling.device == "cpu"
    assert ceiling.copy_gbs > 0 and set(ceiling.gemm_tflops) == {"fp32"} and ceiling.gemm_tflops["fp32"] > 0
    timing = results[0].metrics.latency
    assert timing.method == "perf_counter" and len(timing.processes[0].samples_ms) == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not Path("/proc/cpuinfo").is_file(),
                    reason="CPU affinity and /proc/cpuinfo are Linux's")
def test_a_result_names_the_host_cpu_and_the_cpus_its_worker_process_may_use(tmp_path):
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})  # the worker process inherits it
    try:
        [result] = run(tmp_path, [job("eager")])
    finally:
        os.sched_setaffinity(0, allowed)
    assert result.status == "ok", result.error
    assert result.provenance.host_cpus == 1
    model_names = re.findall(r"^model name\s*:\s*(.*\S)", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    if model_names:  # x86; ARM's cpuinfo has none
        assert result.provenance.host_cpu == model_names[0]
