"""How a job ended is one Outcome, whichever way it ended: measured, unsupported or raised."""

from mlcbench.schema import JobSpec, Metrics
from mlcbench.workers.runner import run_job
from mlcbench.workers.workflows import FAULTS_ENV


def job(workflow: str, **overrides) -> JobSpec:
    return JobSpec(**{"model": "ffn-small", "workflow": workflow, "precision": "fp32", "batch_size": 1,
                      "device": "cpu", "warmup": 0, "repeats": 1, **overrides})


def test_an_out_of_memory_error_ends_as_oom_with_its_reason_and_traceback(monkeypatch, tmp_path):
    monkeypatch.setenv(FAULTS_ENV, "1")
    result = run_job(job("fault-oom"), tmp_path)
    assert (result.status, result.reason) == ("oom", "OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 GiB")
    assert "Traceback" in result.error and result.metrics == Metrics() and result.correctness is None


def test_an_unsupported_job_carries_its_reason_and_nothing_measured(tmp_path):
    result = run_job(job("eager", device="cuda"), tmp_path)
    assert result.status == "unsupported" and "no GPU" in result.reason
    assert result.error is None and result.metrics == Metrics()
