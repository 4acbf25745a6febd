"""`mlcbench sweep --env cpu` end to end: containers of the cpu image, rows tagged env=cpu with the image digest."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.planner import stored_processes
from mlcbench.orchestrator.runtimes.docker import UNPRIVILEGED_GID, UNPRIVILEGED_UID, worker_ids
from mlcbench.orchestrator.store import Store

pytestmark = pytest.mark.docker


def test_sweep_in_the_cpu_env_stores_rows_with_the_image_digest(cpu_image, tmp_path):
    db = f"sqlite:///{tmp_path / 'results.db'}"
    arguments = ["sweep", "--env", "cpu", "--gpu", "cpu", "--suite", "smoke", "--model", "ffn-small",
                 "--workflow", "eager,onnxruntime", "--batch-size", "1", "--db", db, "--workdir", str(tmp_path / "work"),
                 "--cache-dir", str(tmp_path / "cache")]
    outcome = CliRunner().invoke(app, arguments)
    assert outcome.exit_code == 0, outcome.output

    rows = Store(db).rows(env="cpu")
    assert {(row.workflow, row.status) for row in rows} == {("eager", "ok"), ("onnxruntime", "ok")}
    assert {row.image_digest for row in rows} == {cpu_image.digest}
    assert all(row.env == "cpu" and row.gpu_tag == "cpu" for row in rows)

    again = CliRunner().invoke(app, arguments)  # resume: everything is stored already
    assert again.exit_code == 0, again.output
    assert len(Store(db).rows(env="cpu")) == len(rows)


def test_own_models_from_config_folders_run_in_the_cpu_image(cpu_image, tmp_path, gpt2_suite):
    """A suite's own LLMs reach a container worker inside their job specs (config.json read on the host, no mount):
    the Llama-3-style and the Qwen2-style model of the README's example through eager, the static cache and the
    compiled decode loop, correct against eager (teacher-forced); a GPT-2, which the compiled decode loop refuses
    there naming the architecture."""
    suite = Path(__file__).resolve().parents[2] / "benchmarks" / "suites" / "own-models.toml"
    db = f"sqlite:///{tmp_path / 'results.db'}"
    options = ["--env", "cpu", "--gpu", "cpu", "--db", db, "--workdir", str(tmp_path / "work"),
               "--cache-dir", str(tmp_path / "cache")]
    outcome = CliRunner().invoke(app, ["sweep", "--suite", str(suite), "--batch-size", "1", *options])
    assert outcome.exit_code == 0, outcome.output
    results = Store(db).cells(env="cpu")
    assert {(result.job.model, result.job.workflow, result.status) for result in results} == {
        (model, workflow, "ok") for model in ("llama3-tiny", "qwen2-tiny")
        for workflow in ("eager", "torch_compile_static", "torch_compile_decode")}
    checks = [result.correctness for result in results if result.job.workflow != "eager"]
    assert all(check.method == "teacher_forced" and check.passed for check in checks), checks

    outcome = CliRunner().invoke(app, ["sweep", "--suite", str(gpt2_suite), *options])
    assert outcome.exit_code == 0, outcome.output
    gpt2 = {result.job.workflow: result for result in Store(db).cells(env="cpu") if result.job.model == "gpt2-tiny"}
    assert {workflow: result.status for workflow, result in gpt2.items()} == {
        "eager": "ok", "torch_compile_decode": "unsupported"}
    assert "architecture GPT2LMHeadModel is not implemented" in gpt2["torch_compile_decode"].reason


def test_a_compiled_cell_runs_as_the_gpu_images_user_and_keeps_its_caches_in_the_cache_folder(cpu_image, tmp_path):
    """On the H200 every torch_compile cell failed in the gpu-host container, whose worker is uid 65534 (a root
    host's): PermissionError on /tmp/.triton. A container's worker can write its exchange and cache folders alone;
    a compiled cell runs there as that user, and its second process (another container) loads what the first
    compiled into the cache folder."""
    if worker_ids() != (UNPRIVILEGED_UID, UNPRIVILEGED_GID):
        pytest.skip("the GPU image's user (uid 65534) is the one a root host's workers run as")
    suite = tmp_path / "suite.toml"
    suite.write_text('name = "compiled"\ndescription = "one compiled cell, two processes"\n[[entries]]\n'
                     'models = ["ffn-small"]\nworkflows = ["torch_compile"]\nbatch_sizes = [1]\nwarmup = 0\n'
                     'repeats = 1\nrepetition = { processes = 2 }\n')
    db = f"sqlite:///{tmp_path / 'results.db'}"
    outcome = CliRunner().invoke(app, ["sweep", "--env", "cpu", "--gpu", "cpu", "--suite", str(suite), "--db", db,
                                       "--workdir", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")])
    assert outcome.exit_code == 0, outcome.output
    (cell,) = Store(db).cells(env="cpu")
    assert cell.status == "ok", cell.error
    # the cold process stands beside the warm ones or, when its timing parts from theirs, in other_series
    assert sorted(process.compile_cache for process in stored_processes(cell)) == ["cold", "warm", "warm"]
