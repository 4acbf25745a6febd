"""Broken or hostile job files, env.toml files and result lines: refused with the file and field named, or (result
lines) kept as failed results with the raw text, never dropped and never a crash of the orchestrator."""

import json

import pytest

from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE, load_env
from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.runtimes.base import Runtime, WorkerFiles
from mlcbench.schema import EnvSpec, JobSpec, Result
from mlcbench.workers.exchange import JobFileError, read_jobs
from tests.conftest import EndedWorker, results_of

JOB = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu", warmup=0, repeats=1)
GOOD_LINE = JOB.model_dump_json().encode()


@pytest.mark.parametrize("content, where", [
    (b"[" + GOOD_LINE + b"]\n", ":1: field (line): Input should be an object"),
    (GOOD_LINE + b"\n" + GOOD_LINE[:40] + b"\n", ":2: field (line): Invalid JSON"),
    (GOOD_LINE[:-1] + b', "priority": 3}\n', ":1: field priority: Extra inputs are not permitted"),
    (GOOD_LINE.replace(b'"batch_size":1', b'"batch_size":[1]'), ":1: field batch_size"),
    (GOOD_LINE.replace(b'"repeats":1', b'"repeats":0'), ":1: field repeats: Input should be greater than or equal"),
    (b"\n" + GOOD_LINE.replace(b"eager", b"eag\xe9r"), ":2: not UTF-8 text"),
    (GOOD_LINE + b"\n" + b'{"model": "' + b"m" * (100 << 20) + b'"}\n', ":2: line over the"),
])
def test_a_bad_job_file_is_refused_naming_file_line_and_field(tmp_path, content, where):
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(content)
    with pytest.raises(JobFileError) as refused:
        read_jobs(path)
    assert str(refused.value).startswith(f"{path}{where}")


def test_a_job_line_with_a_unicode_line_separator_inside_a_string_is_one_line(tmp_path):
    job = JOB.model_copy(update={"model_path": "/models/a\u2028b"})
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps(json.loads(job.model_dump_json()), ensure_ascii=False) + "\n", encoding="utf-8")
    assert read_jobs(path) == [job]


@pytest.mark.parametrize("toml, field", [
    ('runtime = "local"\nworkflows = "eager"\n', "field workflows"),
    ('runtime = "local"\nworkflows = ["*"]\nrun = 5\n', "field run"),
    ('runtime = "local"\nworkflows = ["*"]\ngpu_archs = [8.9]\n', "field gpu_archs.0"),
    ('runtime = "local"\nworkflows = ["*"]\n[run]\nshm_size = 8\n', "field run.shm_size"),
    ('runtime = "local"\nworkflows = ["*"]\ncolour = "blue"\n', "field colour"),
    ('runtime = "podman"\nworkflows = ["*"]\n', "field runtime"),
    ('workflows = ["*"]\n', "field runtime"),
    ('name = "other"\nruntime = "local"\nworkflows = ["*"]\n', "field name"),
    ('runtime = "local"\nworkflows = ["*"\n', "is not valid TOML"),
    (b'runtime = "local"\nworkflows = ["\xff"]\n', "is not valid TOML"),
])
def test_a_bad_env_toml_is_refused_naming_the_file_and_field(tmp_path, monkeypatch, toml, field):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "env.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(tmp_path))
    with pytest.raises(UsageError) as refused:
        load_env("broken")
    assert str(folder / "env.toml") in str(refused.value) and field in str(refused.value)


class _ScriptedRuntime(Runtime):
    """Its workers write the given result lines at once, then exit 0."""

    def __init__(self, lines: list[bytes]):
        super().__init__(EnvSpec(name="scripted", runtime="local", workflows=["*"]))
        self.lines = lines

    def start_worker(self, files: WorkerFiles) -> EndedWorker:
        files.results.write_bytes(b"".join(line + b"\n" for line in self.lines))
        return EndedWorker()


def test_result_lines_that_do_not_parse_are_stored_as_failed_results_with_the_raw_text(tmp_path):
    jobs = [JOB.model_copy(update={"batch_size": batch}) for batch in (1, 2, 3, 4, 5, 6)]
    good = Result(job_id=jobs[0].job_id, job=jobs[0], status="ok").model_dump_json().encode()
    unknown_field = good[:-1] + b', "extra": 1}'
    lines = [good, good[:50], b"[1, 2]", b"\xff\xfe not text", unknown_field, b"x" * 300_000,
             b"one line too many"]
    got = results_of(_ScriptedRuntime(lines), jobs, tmp_path, poll_s=0.01)

    assert [result.job_id for result in got] == [job.job_id for job in jobs]
    assert [result.status for result in got] == ["ok"] + ["failed"] * 5
    assert got[1].error == good[:50].decode() and got[2].error == "[1, 2]"
    assert "not text" in got[3].error and got[4].error == unknown_field.decode()
    assert got[5].error == "x" * 4000 and "does not parse" in got[5].reason
