import json
import subprocess
import sys

from mlcbench.schema import Result
from tests.conftest import REPO

FAST = {"model": "matmul-small", "precision": "fp32", "batch_size": 1, "device": "cpu", "warmup": 0, "repeats": 2}


def run_worker(tmp_path, lines: list[str]) -> subprocess.CompletedProcess:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, "-m", "mlcbench.workers", "run", "--jobs", str(jobs), "--results",
                           str(tmp_path / "results.jsonl"), "--progress", str(tmp_path / "progress.txt"),
                           "--cache-dir", str(tmp_path / "cache")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_worker_answers_each_job_with_one_result_line_in_order(tmp_path):
    jobs = [json.dumps({**FAST, "workflow": "eager"}), json.dumps({**FAST, "workflow": "tensorrt_llm"})]
    done = run_worker(tmp_path, jobs)
    assert done.returncode == 0, done.stderr
    results = [Result.model_validate_json(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r.status for r in results] == ["ok", "unsupported"]
    assert "tensorrt_llm not importable" in results[1].reason
    assert results[0].metrics.latency.repeats == 2
    assert (tmp_path / "progress.txt").read_text().split() == [r.job_id for r in results]


def test_malformed_job_file_is_refused_whole_with_one_line_naming_line_and_field(tmp_path):
    good = json.dumps({**FAST, "workflow": "eager"})
    bad = json.dumps({**FAST, "workflow": "eager", "batch_size": "many"})
    done = run_worker(tmp_path, [good, bad])
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "jobs.jsonl:2" in done.stderr and "batch_size" in done.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_a_job_naming_an_unknown_workflow_is_refused_before_anything_runs(tmp_path):
    done = run_worker(tmp_path, [json.dumps({**FAST, "workflow": "eager"}), json.dumps({**FAST, "workflow": "eagre"})])
    assert done.returncode == 2
    assert "jobs.jsonl:2" in done.stderr and "workflow" in done.stderr and "unknown workflow 'eagre'" in done.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_truncated_job_line_is_refused(tmp_path):
    done = run_worker(tmp_path, ['{"model": "matmul-small", "workflow": "eag'])
    assert done.returncode == 2
    assert "jobs.jsonl:1" in done.stderr
