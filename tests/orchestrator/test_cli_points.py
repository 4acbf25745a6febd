"""Issue 34's smaller CLI points: `envs` with a broken or no env, a compute capability, a status or a pair of GPUs
that cannot be meant, `results --history` at scale, a forced GPU tag on a CPU, `--suite paper` on a CPU, and --db as a
plain path."""

import shutil

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.envs import ENVS_DIR_VARIABLE, envs_dir
from mlcbench.orchestrator.errors import ExitCode
from tests.orchestrator.test_hostile_cli import one_error_line

runner = CliRunner()


def test_one_broken_env_is_listed_as_broken_beside_the_others(tmp_path, monkeypatch):
    for name in ("local", "cpu"):
        shutil.copytree(envs_dir() / name, tmp_path / name)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "env.toml").write_text('runtime = "podman"\nworkflows = []\n')
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(tmp_path))
    done = runner.invoke(app, ["envs", "--compute-capability", "8.9"])
    assert done.exit_code == ExitCode.USAGE
    assert "local" in done.stdout and "cpu" in done.stdout and "broken: see below" in done.stdout
    assert done.stderr.startswith("error: env 'broken'") and "field runtime" in done.stderr


def test_an_empty_envs_folder_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv(ENVS_DIR_VARIABLE, str(tmp_path))
    one_error_line(runner.invoke(app, ["envs"]), ExitCode.USAGE,
                   f"no envs in {tmp_path}: each env is a folder there with an env.toml ({ENVS_DIR_VARIABLE} is set")


@pytest.mark.parametrize("value", ["banana", "8", "8.9.1", "sm_89"])
def test_a_compute_capability_that_is_not_one_is_refused(value):
    one_error_line(runner.invoke(app, ["envs", "--compute-capability", value]), ExitCode.USAGE,
                   f"--compute-capability {value!r}: expected MAJOR.MINOR")


@pytest.fixture
def simulated(monkeypatch):
    from mlcbench.orchestrator import sweep as sweeping
    from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime

    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0))


def test_the_paper_suite_on_a_cpu_warns_before_it_starts_a_billion_parameter_model(tmp_path, simulated):
    done = runner.invoke(app, ["sweep", "--suite", "paper", "--gpu", "cpu", "--model", "tinyllama-1.1b",
                               "--workflow", "eager", "--batch-size", "64", "--db", str(tmp_path / "s.db"),
                               "--workdir", str(tmp_path / "w")])
    assert done.stderr.startswith("warning: on a CPU: 1 job(s) of tinyllama-1.1b (each of ≥ 1B parameters), at "
                                  "batch up to 64, may each take hours"), done.stderr
    quiet = runner.invoke(app, ["sweep", "--suite", "smoke", "--gpu", "cpu", "--model", "llama-2layer",
                                "--workflow", "eager", "--db", str(tmp_path / "s.db"), "--workdir", str(tmp_path / "w")])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr, quiet.output


def test_a_forced_gpu_tag_on_a_cpu_does_not_read_as_that_gpu(tmp_path, simulated):
    done = runner.invoke(app, ["sweep", "--suite", "tiny", "--model", "matmul-small", "--batch-size", "1", "--gpu",
                               "h100", "--force-gpu-tag", "--db", str(tmp_path / "s.db"), "--workdir",
                               str(tmp_path / "w")])
    assert done.exit_code == 0, done.output
    assert "on h100" not in done.stdout
    assert "suite tiny on this host's CPU, results tagged h100 (--force-gpu-tag)" in done.stdout


def test_db_takes_a_plain_path_as_against_and_merge_do(tmp_path, simulated):
    path = tmp_path / "plain.db"
    swept = runner.invoke(app, ["sweep", "--suite", "tiny", "--model", "matmul-small", "--batch-size", "1", "--db",
                                str(path), "--workdir", str(tmp_path / "w")])
    assert swept.exit_code == 0 and path.is_file(), swept.output
    for command in (["results"], ["export"], ["report"]):
        done = runner.invoke(app, [*command, "--db", str(path)])
        assert done.exit_code == 0 and "matmul-small" in done.stdout, done.output


@pytest.mark.parametrize("command", [["results"], ["export"]])
def test_a_status_that_is_not_one_is_refused(tmp_path, command):
    one_error_line(runner.invoke(app, [*command, "--status", "ok,fialed", "--db", str(tmp_path / "none.db")]),
                   ExitCode.USAGE, "--status 'fialed': not a status; known: ok, unsupported")


@pytest.mark.parametrize("pair", [["--gpu", "cpu", "--gpu", "cpu"], ["--env", "local", "--env", "local"]])
def test_compare_refuses_one_side_twice(tmp_path, pair):
    one_error_line(runner.invoke(app, ["compare", *pair, "--db", str(tmp_path / "none.db")]), ExitCode.USAGE,
                   "twice would compare its results with themselves")


def test_compare_refuses_a_store_against_itself(tmp_path):
    from tests.orchestrator.test_hostile_cli import store_of

    path, url = store_of(tmp_path)
    one_error_line(runner.invoke(app, ["compare", "--db", url, "--against", str(path)]), ExitCode.USAGE,
                   "is the --db store itself")


def test_results_history_lists_the_latest_attempts_with_when_and_which_sweep(tmp_path):
    from datetime import datetime, timezone

    from mlcbench.orchestrator.store import Store
    from tests.orchestrator.stores import JOB, tagged

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    def attempt(minute: int):
        result = tagged(JOB, minute=minute)
        return result.model_copy(update={"provenance": result.provenance.model_copy(update={
            "sweep_id": f"sweep-{minute}"})})

    store.put_all([(attempt(minute), f"sweep-{minute}") for minute in range(60)])
    done = runner.invoke(app, ["results", "--history", "--limit", "5", "--db", str(tmp_path / "s.db")])
    assert done.exit_code == 0, done.output
    assert "the latest 5 stored attempt(s)" in done.stdout and "older attempts are not shown" in done.stdout
    shown = [f"sweep-{minute}" for minute in range(60) if f"sweep-{minute} " in done.stdout]
    assert shown == [f"sweep-{minute}" for minute in range(55, 60)]
    assert f"{datetime(2026, 1, 1, 0, 59, tzinfo=timezone.utc):%Y-%m-%d %H:%M:%S}" in done.stdout
    everything = runner.invoke(app, ["results", "--history", "--limit", "0", "--db", str(tmp_path / "s.db")])
    assert "the latest 60 stored attempt(s)" in everything.stdout and "not shown" not in everything.stdout
