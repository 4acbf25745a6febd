"""A user's mistake or a failing machine is one line on stderr (exit 2, or 1 for the machine) and leaves the store
as it was; read commands create nothing and read read-only stores; passwords are never printed; exports are atomic;
the work folders of ended sweeps are removed but for the latest failed one."""

import errno
import hashlib
import os
from pathlib import Path

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from mlcbench.orchestrator import cli, sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from tests.orchestrator.stores import JOB, tagged
from tests.orchestrator.test_store_history import KillingRuntime

runner = CliRunner()
TINY = ["sweep", "--suite", "tiny", "--model", "matmul-small"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(done, code: int, message: str) -> None:
    assert done.exit_code == code, done.output
    assert done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.output


def store_of(tmp_path: Path, results=None) -> tuple[Path, str]:
    path = tmp_path / "store.db"
    store = Store(f"sqlite:///{path}")
    for result in results or [tagged(JOB), tagged(JOB.model_copy(update={"batch_size": 2}), "failed")]:
        store.put(result)
    store.engine.dispose()
    return path, f"sqlite:///{path}"


@pytest.mark.parametrize("command", [["results"], ["report"], ["export"], ["compare", "--env", "a", "--env", "b"]])
def test_a_file_that_is_not_a_store_is_refused_and_left_as_it_is(tmp_path, command):
    path = tmp_path / "t.db"
    path.write_text("hi\n")
    one_error_line(runner.invoke(app, [*command, "--db", f"sqlite:///{path}"]), ExitCode.USAGE,
                   "file is not a database")
    assert path.read_text() == "hi\n"


@pytest.mark.parametrize("command, message", [
    (["results"], "no result store at /proc/x/y.db: a sweep creates one"),
    (["sweep"], "cannot create the result store /proc/x/y.db"),
])
def test_a_store_where_none_can_be_is_refused(command, message):
    one_error_line(runner.invoke(app, [*command, "--db", "sqlite:////proc/x/y.db"]), ExitCode.USAGE, message)


@pytest.mark.parametrize("command", [["results"], ["report"], ["export"]])
def test_read_commands_do_not_create_a_store(tmp_path, command):
    one_error_line(runner.invoke(app, [*command, "--db", f"sqlite:///{tmp_path / 'typo.db'}"]), ExitCode.USAGE,
                   "no result store at")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", ["--workdir", "--cache-dir"])
def test_a_file_given_as_a_folder_is_refused_before_anything_runs(tmp_path, option):
    (tmp_path / "a-file").write_text("")
    db = tmp_path / "store.db"
    one_error_line(runner.invoke(app, [*TINY, "--db", f"sqlite:///{db}", option, str(tmp_path / "a-file")]),
                   ExitCode.USAGE, f"{option} {tmp_path / 'a-file'}: {tmp_path / 'a-file'} is a file, not a folder")
    assert not db.exists()


def test_an_immutable_store_is_read_by_the_read_commands_and_refused_by_a_sweep(tmp_path, immutable):
    path, url = store_of(tmp_path)
    before = digest(path)
    immutable(path)
    listed = runner.invoke(app, ["results", "--db", url])
    assert listed.exit_code == 0 and "2 stored result(s)" in listed.output
    exported = runner.invoke(app, ["export", "--db", url])
    assert exported.exit_code == 0 and len(exported.stdout.splitlines()) == 3
    assert runner.invoke(app, ["report", "--db", url]).exit_code == 0
    # exit 1, as the README's table has "a store that cannot be written"
    one_error_line(runner.invoke(app, [*TINY, "--db", url, "--workdir", str(tmp_path / "w")]), ExitCode.ENVIRONMENT,
                   "cannot be written (a read-only file or filesystem)")
    assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["store.db"]


def test_a_full_disk_mid_sweep_is_one_error_line_exit_1_and_what_was_stored_stays(tmp_path, monkeypatch):
    path, url = store_of(tmp_path, [tagged(JOB.model_copy(update={"batch_size": 64}))])

    class FullStore(Store):
        """SQLite refuses to grow the file past its size now: 'database or disk is full', as on a full disk."""

        def __init__(self, url: str, create: bool = True):
            super().__init__(url, create)
            with self.engine.connect() as connection:
                pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
            event.listen(self.engine, "connect",
                         lambda dbapi, _record: dbapi.execute(f"PRAGMA max_page_count={pages}"))
            self.engine.dispose()

    monkeypatch.setattr(cli, "Store", FullStore)
    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0))
    done = runner.invoke(app, [*TINY, "--db", url, "--workdir", str(tmp_path / "w")])
    one_error_line(done, ExitCode.ENVIRONMENT, f"cannot write to the result store {url}: database or disk is full")
    assert 64 in [r.job.batch_size for r in Store(url).cells()]  # readable, the earlier row kept


@pytest.mark.parametrize("command", [["export", "--out"], ["report", "--markdown"]])
def test_writing_under_a_file_is_one_error_line_exit_2(tmp_path, command):
    path, url = store_of(tmp_path)
    one_error_line(runner.invoke(app, [*command, str(path / "out.txt"), "--db", url]), ExitCode.USAGE,
                   f"{path} is a regular file, not a folder")


def test_a_failed_export_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    path, url = store_of(tmp_path)
    out = tmp_path / "results.parquet"
    out.write_bytes(b"the previous export")

    def write_half_then_fill_the_disk(results, target: Path) -> None:
        target.write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr("mlcbench.orchestrator.cli.reports.write_parquet", write_half_then_fill_the_disk)
    done = runner.invoke(app, ["export", "--format", "parquet", "--out", str(out), "--db", url])
    one_error_line(done, ExitCode.ENVIRONMENT, "No space left on device")
    assert out.read_bytes() == b"the previous export"
    assert list(tmp_path.glob(".results.parquet*")) == []  # no temporary left


def test_a_password_is_never_printed(tmp_path):
    done = runner.invoke(app, ["results", "--db", "mysql://a:TopSecret@h/x"])
    one_error_line(done, ExitCode.USAGE, "cannot use --db mysql://a:***@h/x")
    assert "TopSecret" not in done.output


def test_the_work_folders_of_ended_sweeps_go_but_the_latest_failed_ones_stay(tmp_path, monkeypatch):
    workdir, url = tmp_path / "work", f"sqlite:///{tmp_path / 'store.db'}"
    running = workdir / "otherhost-1-20260101T000000-local"  # a sweep still running (no end marker)
    running.mkdir(parents=True)

    def sweep(runtime, *extra: str) -> set[str]:
        monkeypatch.setattr(sweeping, "make_runtime", runtime)
        runner.invoke(app, [*TINY, "--db", url, "--workdir", str(workdir), "--rerun", *extra])
        return {folder.name for folder in workdir.iterdir()} - {running.name}

    ok = lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0)  # noqa: E731
    killed = lambda env, _o, _g: KillingRuntime(env)  # noqa: E731
    assert sweep(ok) == set()
    first_failure = sweep(killed, "--batch-size", "1")
    assert len(first_failure) == 1
    assert sweep(ok) == first_failure  # the logs of the latest failed sweep stay
    second_failure = sweep(killed, "--batch-size", "2")
    assert len(second_failure) == 1 and second_failure != first_failure
    assert running.is_dir()


READ_ONLY_COMMANDS = [["results"], ["results", "--history"], ["report"], ["export"],
                      ["compare", "--env", "a", "--env", "b"]]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_another_program_s_database_is_refused_and_not_touched(tmp_path, command):
    """No mlcbench table is added and the journal mode is not switched to WAL: the file is byte for byte as it was."""
    import sqlite3

    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.execute("INSERT INTO notes VALUES ('mine')")
    connection.close()
    before = digest(path)
    done = runner.invoke(app, [*command, "--db", f"sqlite:///{path}"])
    one_error_line(done, ExitCode.USAGE, f"sqlite:///{path} is not an mlcbench result store")
    assert digest(path) == before and sorted(entry.name for entry in tmp_path.iterdir()) == ["theirs.db"]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS)
def test_an_empty_file_is_refused_not_made_a_store(tmp_path, command):
    path = tmp_path / "empty.db"
    path.touch()
    one_error_line(runner.invoke(app, [*command, "--db", f"sqlite:///{path}"]), ExitCode.USAGE,
                   "is not an mlcbench result store (an empty database")
    assert path.stat().st_size == 0
