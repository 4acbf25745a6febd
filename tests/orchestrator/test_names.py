"""A name a user gives (a suite's, a model's) becomes a cache folder, a value in the store and terminal text: it is
checked once, where it enters (schema.base.Name), and refused before any job runs. A store written before holds any
name: reading it shows the name, escaped, and never fails on it."""

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.schema import MODELS
from tests.orchestrator.stores import JOB, tagged
from tests.orchestrator.test_hostile_cli import one_error_line, store_of

runner = CliRunner()
MARKUP, ESCAPE, TRAVERSAL, LONG = "[/]bold", "red\x1b[31m", "../../outside", "m" * 65


def _suite(tmp_path, suite_name: str = "mine", model: str = "mine-ffn") -> str:
    path = tmp_path / "suite.toml"
    path.write_text(f'name = "{suite_name}"\ndescription = "names"\n[models."{model}"]\narchitecture = "ffn"\n'
                    f'hidden_size = 8\nintermediate_size = 16\n[[entries]]\nmodels = ["{model}"]\n'
                    f'workflows = ["eager"]\nbatch_sizes = [1]\n'.replace("\x1b", "\\u001b"))
    return str(path)


@pytest.mark.parametrize("name, problem", [(MARKUP, "holds '/', '[', ']'"), (ESCAPE, r"holds '\x1b', '['"),
                                           (TRAVERSAL, "holds '/'"), (LONG, "is 65 characters; a name has at most 64"),
                                           ("..", "'.' or '..'")])
@pytest.mark.parametrize("where", ["model", "suite"])
def test_an_unsafe_name_is_refused_before_any_job_runs(tmp_path, name, problem, where):
    suite = _suite(tmp_path, model=name) if where == "model" else _suite(tmp_path, suite_name=name)
    db = tmp_path / "store.db"
    done = runner.invoke(app, ["sweep", "--suite", suite, "--gpu", "cpu", "--db", f"sqlite:///{db}",
                               "--workdir", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")])
    one_error_line(done, ExitCode.USAGE, problem)
    assert "\x1b" not in done.stderr
    assert not db.exists() and not (tmp_path / "work").exists() and not (tmp_path / "cache").exists()


def test_a_safe_name_of_a_suites_own_model_is_taken(tmp_path):
    from mlcbench.orchestrator.suites import get_suite

    assert get_suite(_suite(tmp_path, model="my-ffn_v2.1+x")).entries[0].models == ["my-ffn_v2.1+x"]


def _store_holding(tmp_path, *names: str):
    """A store as an mlcbench before these checks wrote it: a row per name (stored under a stand-in, then renamed in
    the file, as this mlcbench stores no such name)."""
    stand_ins = [f"stand-in-{index}" for index in range(len(names))]
    path, url = store_of(tmp_path, [tagged(JOB.model_copy(update={"model": stand_in,
                                                                  "model_info": MODELS["matmul-small"]}))
                                    for stand_in in stand_ins])
    with sqlite3.connect(path) as connection:
        for stand_in, name in zip(stand_ins, names):
            connection.execute("UPDATE results SET model = ?, result_json = replace(result_json, ?, ?) WHERE model = ?",
                               (name, json.dumps(stand_in), json.dumps(name), stand_in))
    connection.close()
    return path, url


@pytest.mark.parametrize("command", [["results"], ["results", "--history"], ["report"]])
def test_a_store_that_already_holds_such_names_is_read_and_shows_them_escaped(tmp_path, command):
    _, url = _store_holding(tmp_path, MARKUP, ESCAPE, LONG)
    done = runner.invoke(app, [*command, "--db", url])
    assert done.exit_code == 0, done.output
    assert "\x1b" not in done.stdout and r"red\x1b" in done.stdout and "[/]bold" in done.stdout


@pytest.mark.parametrize("dims", ['architecture = "ffn-multilayer"\nhidden_size = 64\nintermediate_size = 64\n'
                                  'depth = 1000000\n',
                                  'architecture = "ffn"\nhidden_size = 1000000\nintermediate_size = 1000000\n'])
def test_a_model_whose_weights_outgrow_the_machine_is_refused_before_a_worker_allocates(tmp_path, dims, monkeypatch):
    from mlcbench.orchestrator import sweep as sweeping

    monkeypatch.setattr(sweeping, "make_runtime", lambda *_: pytest.fail("a worker was started"))
    path = tmp_path / "absurd.toml"
    path.write_text(f'name = "absurd"\ndescription = "too large"\n[models.absurd]\n{dims}[[entries]]\n'
                    f'models = ["absurd"]\nworkflows = ["eager"]\nbatch_sizes = [1]\n')
    db = tmp_path / "store.db"
    done = runner.invoke(app, ["sweep", "--suite", str(path), "--gpu", "cpu", "--db", f"sqlite:///{db}",
                               "--workdir", str(tmp_path / "work")])
    one_error_line(done, ExitCode.USAGE, "the weights alone of absurd (")
    assert "outgrow this host's memory" in done.stderr and not db.exists()


def test_the_size_check_uses_the_gpu_s_memory_where_it_is_known():
    from mlcbench.orchestrator.cli import machine_memory
    from mlcbench.orchestrator.gpu import Target
    from mlcbench.schema import GpuInfo

    gpu = GpuInfo(name="NVIDIA H100", memory_total_bytes=80 * 10**9)
    assert machine_memory(Target(tag="h100", device="cuda", gpus=(gpu,))) == (80 * 10**9, "the GPU's memory")
    assert machine_memory(Target(tag="h200", device="cuda", gpus=()))[0] == 141 * 10**9


def test_merge_refuses_a_name_longer_than_the_store_holds_and_stores_nothing(tmp_path):
    """SQLite stores any length; PostgreSQL refused it at the insert, after the work. Every backend refuses it alike,
    before anything is written."""
    from mlcbench.orchestrator.store import Store

    source, _ = _store_holding(tmp_path, LONG)
    target = tmp_path / "target.db"
    done = runner.invoke(app, ["merge", str(source), "--into", str(target)])
    one_error_line(done, ExitCode.USAGE, "as a result's model: 65 characters, more than the store's 64")
    assert Store(f"sqlite:///{target}", create=False).rows() == []
    assert len(Store(f"sqlite:///{source}", create=False).rows()) == 1  # the source was read, whole
