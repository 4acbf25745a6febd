"""A secret (HF_TOKEN) reaches workers as a run-time environment variable only: never an image's build settings, a
container's labels or command, a stored result, or a stored worker log tail."""

import json
from pathlib import Path

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.envs.images import BuildOptions, build_args, image_tag
from mlcbench.orchestrator.runtimes.base import Runtime, WorkerFiles
from mlcbench.orchestrator.runtimes.docker import container_options, worker_ids
from mlcbench.orchestrator.store import Store
from mlcbench.schema import EnvSpec, JobSpec, Result, Suite, SuiteEntry
from tests.conftest import EndedWorker

SECRET = "hf_SECRETsecretSECRET0123456789"
CPU_ENV = EnvSpec(name="cpu", runtime="docker", workflows=["eager"])


def test_a_container_gets_the_secret_in_its_run_time_environment_only(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    options = container_options(CPU_ENV, "mlcbench/cpu:abc", WorkerFiles(tmp_path / "work"), tmp_path / "cache",
                                labels={"mlcbench.pid": "1"})
    assert options["environment"]["HF_TOKEN"] == SECRET
    rest = {name: value for name, value in options.items() if name != "environment"}
    assert SECRET not in json.dumps(rest, default=str)
    assert options["user"] == "{}:{}".format(*worker_ids())  # the host user (nobody under root), never root
    assert options["privileged"] is False and options["network_mode"] == "none"
    assert SECRET not in json.dumps([build_args(CPU_ENV, BuildOptions()), image_tag(CPU_ENV)])


class _LeakyRuntime(Runtime):
    """Its workers echo the secret in a batch-1 job's result error, then die with the secret in their log (so the job
    after it, in the same worker or a fresh one, ends crashed)."""

    def start_worker(self, files: WorkerFiles) -> EndedWorker:
        jobs = [JobSpec.model_validate_json(line) for line in files.jobs.read_text().splitlines()]
        if jobs[0].batch_size == 1:
            leaked = Result.without_run(jobs[0], "failed", f"token {SECRET} refused", error=f"env: HF_TOKEN={SECRET}")
            files.results.write_text(leaked.model_dump_json() + "\n")
        return EndedWorker(exit_code=-11, log=f"Traceback ... Authorization: Bearer {SECRET}\nSegmentation fault")


def test_a_secret_a_worker_echoes_is_masked_before_anything_is_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    suite = Suite(name="two", description="two jobs", entries=[
        SuiteEntry(models=["matmul-small"], workflows=["eager"], batch_sizes=[1, 2], warmup=0, repeats=1)])
    options = sweeping.SweepOptions(suite=suite, env_names=["local"], target=Target("cpu", "cpu", ()),
                                    workdir=tmp_path / "work")
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    sweeping.run(options, store, runtime_factory=lambda env, _options, _gpu: _LeakyRuntime(env))

    rows = store.rows()
    assert sorted(row.status for row in rows) == ["crashed", "failed"]
    crashed = next(row for row in rows if row.status == "crashed")
    assert "Segmentation fault" in crashed.result().log_tail and "***" in crashed.result().log_tail
    for row in rows:
        assert SECRET not in row.result_json and SECRET not in (row.reason or "")
    with store.engine.connect() as connection:
        dump = "\n".join(connection.connection.driver_connection.iterdump())
    assert SECRET not in dump


def test_a_real_local_sweep_with_the_secret_set_stores_no_trace_of_it(tmp_path, mlcbench):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    done = mlcbench("sweep", "--suite", "tiny", "--model", "matmul-small", "--batch-size", "1", "--db", db,
                    env={"HF_TOKEN": SECRET}, timeout=300)
    assert done.returncode == 0, done.stderr
    [row] = Store(db).rows()
    assert row.status == "ok" and SECRET not in row.result_json
    assert SECRET not in done.stdout + done.stderr
    assert not any(SECRET in path.read_text(errors="replace") for path in Path(tmp_path / "results").rglob("*.log"))
