"""The torchscript workflow end to end through the local env: a worker process of the env's runtime, the job's
result read back by the host, the traced module checked against eager."""

from mlcbench.orchestrator.envs import load_env
from mlcbench.orchestrator.runtimes.local import LocalRuntime
from mlcbench.schema import WORKFLOWS, JobSpec, Result
from tests.conftest import results_of


def job(model: str, **overrides) -> JobSpec:
    return JobSpec(**{"model": model, "workflow": "torchscript", "precision": "fp32", "batch_size": 2,
                      "device": "cpu", "warmup": 2, "repeats": 3, **overrides})


def run(tmp_path, jobs: list[JobSpec]) -> list[Result]:
    return results_of(LocalRuntime(load_env("local"), cache_dir=tmp_path / "cache"), jobs, tmp_path / "work")


def test_torchscript_runs_synthetic_models_in_the_local_env_and_matches_eager(tmp_path):
    jobs = [job("ffn-small"), job("matmul-relu-small", batch_size=1), job("ffn-multilayer-small")]
    results = run(tmp_path, jobs)
    assert [r.job_id for r in results] == [j.job_id for j in jobs]
    for result in results:
        assert result.status == "ok", (result.reason, result.error)
        assert result.correctness.passed and result.correctness.rel_l2_error < 1e-4
        assert result.metrics.applied.backend == "torchscript"
        assert result.metrics.tflops > 0 and result.metrics.compile_s > 0
        # the archive a deployment would load was saved to the env's cache and loaded back from there
        assert (tmp_path / "cache" / "torchscript" / f"{result.job_id}.pt").is_file()


def test_an_llm_is_refused_with_the_catalogs_reason_before_the_model_is_built(tmp_path):
    [result] = run(tmp_path, [job("llama-2layer", output_len=4)])
    assert result.status == "unsupported"
    assert WORKFLOWS["torchscript"].why_not["llm"] in result.reason
    assert result.metrics.load_s is None
