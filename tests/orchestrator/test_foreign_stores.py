"""Another program's SQLite file given as --db is refused before anything is written to it; a command that only
reads never writes a store, an older-schema one included (it reads a migrated copy); a --db path is a file's name,
taken literally."""

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.database import _alembic_config
from tests.orchestrator.stores import HEAD, JOB, old_store, tagged

runner = CliRunner()
TINY = ["sweep", "--suite", "tiny", "--model", "matmul-small"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def their_database(path: Path, *tables: str) -> Path:
    with closing(sqlite3.connect(path)) as connection, connection:
        for table in tables:
            connection.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body TEXT)")
            connection.execute(f"INSERT INTO {table} (body) VALUES ('theirs')")
    return path


@pytest.mark.parametrize("tables", [("notes",), ("results", "notes")])
@pytest.mark.parametrize("command", [TINY, ["results"], ["export"], ["report"], ["merge", "--into", "{tmp}/m.db"]])
def test_another_program_s_sqlite_file_is_refused_before_any_write(tmp_path, command, tables):
    path = their_database(tmp_path / "other-app.db", *tables)
    before = digest(path)
    if command[0] == "merge":
        words = ["merge", "--into", str(tmp_path / "m.db"), str(path)]
    else:
        words = [*command, "--db", str(path), *(["--workdir", str(tmp_path / "w")] if command is TINY else [])]

    done = runner.invoke(app, words)

    assert done.exit_code == ExitCode.USAGE, done.output
    assert done.stderr.startswith("error: ") and "is not an mlcbench result store" in done.stderr, done.stderr
    assert "run the command again" not in done.stderr
    assert digest(path) == before
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["other-app.db"]


@pytest.mark.parametrize("command", [["results"], ["results", "--history"], ["export"], ["report"],
                                     ["compare", "--env", "local", "--env", "other"]])
def test_a_read_command_reads_an_older_store_without_writing_it(tmp_path, command):
    path = old_store(tmp_path / "old.db")
    before = digest(path)

    done = runner.invoke(app, [*command, "--db", str(path)])

    assert done.exit_code == 0, done.output
    assert digest(path) == before
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["old.db"]
    if command[0] in ("results", "export"):
        assert "matmul-small" in done.stdout


def test_merge_reads_an_older_source_without_writing_it_and_upgrades_only_its_target(tmp_path):
    source = old_store(tmp_path / "old.db")
    before = digest(source)

    done = runner.invoke(app, ["merge", "--into", str(tmp_path / "new.db"), str(source)])

    assert done.exit_code == 0, done.output
    assert digest(source) == before
    assert [row.job_id for row in Store(f"sqlite:///{tmp_path / 'new.db'}", create=False).rows()] == [JOB.job_id]


def test_a_merge_of_no_store_upgrades_its_target(tmp_path):
    path = old_store(tmp_path / "old.db")

    assert runner.invoke(app, ["merge", "--into", str(path)]).exit_code == 0

    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD,)


@pytest.mark.parametrize("name", ["a?b.db", "a%25b.db", "100%.db", "a#b.db"])
def test_a_db_path_is_taken_literally(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'made.db'}")
    store.put(tagged(JOB))
    store.engine.dispose()
    (tmp_path / "made.db").rename(tmp_path / name)

    listed = runner.invoke(app, ["results", "--db", name])
    merged = runner.invoke(app, ["merge", "--into", f"into-{name}", name])

    assert listed.exit_code == 0 and "matmul-small" in listed.stdout, listed.output
    assert merged.exit_code == 0, merged.output
    stores = {entry.name for entry in tmp_path.iterdir() if not entry.name.endswith(("-wal", "-shm"))}
    assert stores == {name, f"into-{name}"}


@pytest.mark.postgres
def test_a_read_command_refuses_an_older_server_store_untouched_and_merge_upgrades_it(schema_url):
    engine = create_engine(schema_url)
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0002")
    engine.dispose()

    done = runner.invoke(app, ["results", "--db", schema_url])

    assert done.exit_code == ExitCode.USAGE and "`mlcbench merge --into URL`" in done.stderr, done.output
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0002"
    assert runner.invoke(app, ["merge", "--into", schema_url]).exit_code == 0
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
    engine.dispose()
