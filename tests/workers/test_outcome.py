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


def _cuda_build_whose_init_raises(monkeypatch, message: str) -> None:
    import torch

    def init():
        raise RuntimeError(message)

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "init", init)


def test_a_gpu_that_does_not_initialise_is_a_failure_naming_cudas_error(monkeypatch, tmp_path):
    _cuda_build_whose_init_raises(monkeypatch, "CUDA error: CUDA-capable device(s) is/are busy or unavailable")
    result = run_job(job("eager", device="cuda"), tmp_path)
    assert result.status == "failed"
    assert result.reason == ("RuntimeError: CUDA did not initialise: CUDA error: CUDA-capable device(s) is/are busy "
                             "or unavailable")


def test_a_cuda_build_that_sees_no_gpu_is_unsupported(monkeypatch, tmp_path):
    _cuda_build_whose_init_raises(monkeypatch, "No CUDA GPUs are available")
    result = run_job(job("eager", device="cuda"), tmp_path)
    assert result.status == "unsupported" and "no GPU" in result.reason


def test_a_failure_s_reason_carries_the_lines_after_a_first_line_that_ends_with_a_colon(monkeypatch, tmp_path):
    """As transformers' config checks raise: the cause is on the line after "...validator 'validate_architecture':"."""
    from mlcbench.workers import runner

    def fails(job, cache_dir, gate):
        try:
            raise KeyError("rope_type")
        except KeyError as error:
            raise ValueError("Class validation error for validator 'validate_architecture':\n"
                             "  head_dim 7 must divide hidden_size 64\n") from error

    monkeypatch.setattr(runner, "_run", fails)
    result = run_job(job("eager"), tmp_path)
    assert result.status == "failed"
    assert result.reason == ("ValueError: Class validation error for validator 'validate_architecture': / head_dim 7 "
                             "must divide hidden_size 64; raised from KeyError: 'rope_type'")
