"""One exit-code contract for every command (errors.py, the README's table): 1 when the environment fails, found
before any row is stored or any job runs; 2 for the user's mistakes; 130 for Ctrl-C, at any moment; one line, never a
traceback; Slurm's refusals in full, leaving nothing behind."""

import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import psycopg.errors as psycopg_errors
import pytest
from sqlalchemy.exc import ProgrammingError
from typer.testing import CliRunner

from mlcbench.orchestrator import cli, sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator import errors
from mlcbench.orchestrator.errors import ExitCode, UsageError
from mlcbench.orchestrator.runtimes import slurm
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from tests.conftest import REPO
from tests.orchestrator.test_hostile_cli import TINY, one_error_line

runner = CliRunner()


def test_the_readme_table_is_the_code_s():
    readme = (REPO / "README.md").read_text()
    table = re.search(r"<!-- exit codes: begin -->\n(.*?)<!-- exit codes: end -->", readme, re.S)
    assert table is not None and table.group(1) == errors.exit_code_table()
    assert [int(code) for code in re.findall(r"^\| `(\d+)` \|", table.group(1), re.M)] == [code.value for code in
                                                                                         ExitCode]


@pytest.fixture
def no_runs(monkeypatch):
    """Fails the test if a sweep starts a worker."""
    started = []
    monkeypatch.setattr(sweeping, "make_runtime",
                        lambda env, _o, _g: started.append(env.name) or SimulatedRuntime(env, lambda job: 0.0))
    return started


def test_a_database_server_that_does_not_answer_is_exit_1(tmp_path, no_runs):
    for command in (["results"], [*TINY, "--workdir", str(tmp_path / "w")]):
        one_error_line(runner.invoke(app, [*command, "--db", "postgresql+psycopg://u:pw@127.0.0.1:1/db"]),
                       ExitCode.ENVIRONMENT, "Connection refused")
    assert no_runs == []


def test_no_docker_engine_is_exit_1_before_any_row_is_stored(tmp_path, monkeypatch, no_runs):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    db = tmp_path / "store.db"
    done = runner.invoke(app, ["sweep", "--suite", "smoke", "--env", "cpu", "--gpu", "cpu", "--db", f"sqlite:///{db}",
                               "--workdir", str(tmp_path / "w")])
    one_error_line(done, ExitCode.ENVIRONMENT, "no Docker engine answers")
    assert not db.exists() and no_runs == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gets past the writability check into /sys")
def test_a_cache_folder_that_passes_the_check_but_cannot_be_made_is_refused_before_anything(tmp_path, no_runs):
    db = tmp_path / "store.db"
    done = runner.invoke(app, [*TINY, "--db", f"sqlite:///{db}", "--workdir", str(tmp_path / "w"),
                               "--cache-dir", "/sys/mlcbench-cache"])
    one_error_line(done, ExitCode.USAGE, "--cache-dir /sys/mlcbench-cache: cannot be used")
    assert not db.exists() and no_runs == []


def test_a_store_that_refuses_writes_is_found_out_before_any_job_runs(tmp_path, no_runs):
    """As a SELECT-only PostgreSQL user: the store opens and reads, and refuses every INSERT."""
    path = tmp_path / "store.db"
    Store(f"sqlite:///{path}").engine.dispose()
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TRIGGER read_only BEFORE INSERT ON results "
                           "BEGIN SELECT RAISE(ABORT, 'permission denied for table results'); END")
    done = runner.invoke(app, [*TINY, "--db", f"sqlite:///{path}", "--workdir", str(tmp_path / "w")])
    one_error_line(done, ExitCode.ENVIRONMENT, "permission denied for table results; nothing was run")
    assert no_runs == []


@pytest.mark.postgres
def test_a_select_only_postgres_user_is_found_out_before_any_job_runs(tmp_path, schema_url, no_runs):
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    Store(schema_url).engine.dispose()
    role = f"reader_{uuid.uuid4().hex[:12]}"  # a server keeps its roles from run to run
    admin = create_engine(schema_url)
    schema = re.search(r"search_path%3D(\w+)", schema_url).group(1)
    with admin.begin() as connection:
        try:
            connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD 'reader-pw'"))
        except ProgrammingError as error:  # a server whose test user may not create roles (.ci/run grants it)
            pytest.skip(f"the test user cannot create a role: {error.orig}")
        connection.execute(text(f"GRANT USAGE ON SCHEMA {schema} TO {role}"))
        connection.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}"))
    try:
        reader = make_url(schema_url).set(username=role, password="reader-pw").render_as_string(False)
        done = runner.invoke(app, [*TINY, "--db", reader, "--workdir", str(tmp_path / "w")])
        one_error_line(done, ExitCode.ENVIRONMENT, "permission denied")
        assert no_runs == []
    finally:
        with admin.begin() as connection:
            # not DROP OWNED BY: PostgreSQL 15 allows it only to a member of the role; the role owns nothing
            connection.execute(text(f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}"))
            connection.execute(text(f"REVOKE ALL ON SCHEMA {schema} FROM {role}"))
            connection.execute(text(f"DROP ROLE {role}"))
        admin.dispose()


@pytest.mark.parametrize("after_s", [0.3, 0.8, 1.3, 1.8, 2.3])
def test_ctrl_c_at_any_moment_of_a_command_is_exit_130_without_a_traceback(tmp_path, after_s):
    store = tmp_path / "store.db"
    Store(f"sqlite:///{store}").engine.dispose()
    process = subprocess.Popen([sys.executable, "-m", "mlcbench.orchestrator", "report", "--db", f"sqlite:///{store}"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert "Traceback" not in stderr
    assert process.returncode in (ExitCode.INTERRUPTED, ExitCode.OK), stderr  # OK: it had ended before the signal
    if process.returncode == ExitCode.INTERRUPTED:
        assert stderr.strip() == "interrupted"


@pytest.mark.parametrize("raised", ["ImportError('initialization failed')", "KeyboardInterrupt()"])
def test_an_error_raised_while_a_ctrl_c_was_handled_is_exit_130_without_a_traceback(raised):
    """A Ctrl-C that lands while an extension module initialises comes out as its own error (an ImportError
    '... initialization failed') whose context is the KeyboardInterrupt: seen once at 0.8 s under a full test run."""
    command = f"""
import mlcbench.orchestrator.cli as cli
def app(prog_name):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise {raised}
cli.app = app
from mlcbench.orchestrator.__main__ import main
main()
"""
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.strip()) == (ExitCode.INTERRUPTED, "interrupted")


def test_an_error_unrelated_to_ctrl_c_still_shows_its_traceback():
    command = """
import mlcbench.orchestrator.cli as cli
def app(prog_name):
    raise ImportError("a real bug")
cli.app = app
from mlcbench.orchestrator.__main__ import main
main()
"""
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "ImportError: a real bug" in done.stderr


@pytest.mark.parametrize("command", [["report"], ["results"], ["export", "--format", "csv", "--out", "-"]])
def test_a_command_that_read_a_store_leaves_no_sqlite_log_beside_it(tmp_path, command):
    """A command ends without CPython's finalization; its connections are still closed, so SQLite folds and removes
    the store's -wal and -shm files (they used to stay beside every store a report had read)."""
    store = tmp_path / "store.db"
    Store(f"sqlite:///{store}").engine.dispose()
    done = subprocess.run([sys.executable, "-m", "mlcbench.orchestrator", *command, "--db", f"sqlite:///{store}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.OK, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["store.db"]


@pytest.mark.parametrize("db, message", [("not a url://x", "cannot use --db not a url://x: not a SQLAlchemy URL"),
                                         ("not a url", "needs a store that every node reaches, not a SQLite file")])
def test_slurm_with_a_db_that_is_not_a_url_is_one_line(tmp_path, db, message):
    one_error_line(runner.invoke(app, ["sweep", "--runtime", "slurm", "--gpu", "cpu", "--db", db]), ExitCode.USAGE,
                   message)


@pytest.mark.parametrize("damage", ["{not json", '{"sweep_id": 3}', "\udcff"])
def test_a_damaged_slurm_plan_is_one_line_for_status_and_slurm_task(tmp_path, damage):
    plan = tmp_path / "work" / "slurm-x" / slurm.PLAN_FILE
    plan.parent.mkdir(parents=True)
    plan.write_bytes(damage.encode("utf-8", "surrogateescape"))
    one_error_line(runner.invoke(app, ["status", "--workdir", str(tmp_path / "work")]), ExitCode.USAGE,
                   f"Slurm sweep plan {plan}")
    one_error_line(runner.invoke(app, ["slurm-task", str(plan)], env={"SLURM_ARRAY_TASK_ID": "0"}), ExitCode.USAGE,
                   f"Slurm sweep plan {plan}")


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch and squeue on PATH as scripts; SQLite let through (a real submission needs a server store)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def install(sbatch: str) -> Path:
        for name, body in (("sbatch", sbatch), ("squeue", "exit 0")):
            path = bin_dir / name
            path.write_text(f"#!/bin/sh\n{body}\n")
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return bin_dir

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(cli, "refuse_sqlite", lambda url: None)
    monkeypatch.setattr(slurm, "refuse_sqlite", lambda url: None)
    return install


def _submit(tmp_path, *extra: str):
    return runner.invoke(app, ["sweep", "--runtime", "slurm", "--gpu", "cpu", "--suite", "tiny", "--model",
                               "matmul-small", "--db", f"sqlite:///{tmp_path / 'store.db'}", "--workdir",
                               str(tmp_path / "work"), *extra])


def test_a_refused_submission_says_all_sbatch_said_and_leaves_nothing(tmp_path, fake_slurm):
    fake_slurm("echo \"sbatch: unrecognized option '--bogus'\" >&2; echo 'Try \"sbatch --help\" for more "
               "information' >&2; exit 1")
    done = _submit(tmp_path, "--sbatch-arg=--bogus")
    one_error_line(done, ExitCode.USAGE, "sbatch refused (exit code 1): sbatch: unrecognized option '--bogus' / Try")
    assert list((tmp_path / "work").iterdir()) == []
    assert Store(f"sqlite:///{tmp_path / 'store.db'}").rows() == []  # nothing stored for a sweep Slurm did not take


def test_two_options_in_one_sbatch_arg_reach_sbatch_as_two(tmp_path, fake_slurm):
    fake_slurm(f'for word in "$@"; do echo "$word"; done > {tmp_path / "argv"}; echo 77')
    done = _submit(tmp_path, "--sbatch-arg", "--account=ml --qos='high prio'", "--sbatch-arg=--exclusive")
    assert done.exit_code == 0, done.output
    argv = (tmp_path / "argv").read_text().splitlines()
    assert "--account=ml" in argv and "--qos=high prio" in argv and "--exclusive" in argv
    one_error_line(_submit(tmp_path, "--sbatch-arg", "--comment='unclosed"), ExitCode.USAGE,
                   "--sbatch-arg \"--comment='unclosed\": No closing quotation")


def test_a_slurm_that_does_not_answer_is_exit_1(tmp_path, fake_slurm):
    bin_dir = fake_slurm("sleep 5")
    (bin_dir / "squeue").write_text("#!/bin/sh\nsleep 5\n")
    slurm_timeout = slurm.SLURM_COMMAND_TIMEOUT_S
    try:
        slurm.SLURM_COMMAND_TIMEOUT_S = 0.5
        one_error_line(_submit(tmp_path), ExitCode.ENVIRONMENT, "squeue did not answer")
    finally:
        slurm.SLURM_COMMAND_TIMEOUT_S = slurm_timeout


@pytest.mark.parametrize("value", [b"1e3", b"1000.0", b"true", b'"4"'])
def test_a_job_file_s_batch_size_must_be_a_whole_number_not_one_json_could_become(tmp_path, value):
    from mlcbench.workers.exchange import JobFileError, read_jobs
    from tests.orchestrator.stores import JOB

    path = tmp_path / "jobs.jsonl"
    path.write_bytes(JOB.model_dump_json().encode().replace(b'"batch_size":1', b'"batch_size":' + value) + b"\n")
    with pytest.raises(JobFileError, match=r":1: field batch_size: Input should be a valid integer"):
        read_jobs(path)


def test_a_sqlite_store_on_a_full_disk_is_the_machine_s_failure_and_a_file_that_is_no_store_the_user_s(tmp_path):
    from sqlalchemy.exc import OperationalError

    from mlcbench.orchestrator.store.database import diagnose

    def error_of(path: Path, *statements: str) -> OperationalError:
        connection = sqlite3.connect(path)
        try:
            for statement in statements:
                connection.execute(statement)
        except sqlite3.DatabaseError as error:
            return OperationalError(statements[-1], None, error)
        raise AssertionError("no error")

    full = error_of(tmp_path / "full.db", "CREATE TABLE t (x BLOB)", "PRAGMA max_page_count=2",
                    "INSERT INTO t VALUES (zeroblob(100000))")
    assert "full" in str(full.orig)
    diagnosis = diagnose(full, "sqlite")
    assert diagnosis.kind is errors.EnvironmentFailure and "free space" in diagnosis.advice
    assert "database server" not in diagnosis.advice
    (tmp_path / "text.db").write_text("hi, not a database" * 100)
    not_a_store = error_of(tmp_path / "text.db", "SELECT * FROM sqlite_master")
    assert diagnose(not_a_store, "sqlite").kind is UsageError


def _refused(orig: Exception):
    from sqlalchemy.exc import OperationalError

    return OperationalError("connect", None, orig)


@pytest.mark.parametrize("orig, advice", [
    (psycopg_errors.InvalidPassword('password authentication failed for user "u"'),
     "check the user name and password"),
    (psycopg_errors.InvalidCatalogName('database "nope" does not exist'), "check the database name in --db"),
    # libpq's refusals before a session exists carry no SQLSTATE: their words tell them apart
    (psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
                              'password authentication failed for user "u"'), "check the user name and password"),
    (psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
                              'database "nope" does not exist'), "check the database name in --db"),
])
def test_a_wrong_password_or_a_missing_database_is_the_user_s_mistake_with_its_own_advice(orig, advice):
    from mlcbench.orchestrator.store.database import diagnose

    diagnosis = diagnose(_refused(orig), "postgresql")
    assert diagnosis.kind is UsageError and advice in diagnosis.advice


def test_a_server_that_does_not_answer_is_the_machine_s_failure():
    from mlcbench.orchestrator.store.database import diagnose

    diagnosis = diagnose(_refused(psycopg.OperationalError(
        'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused')), "postgresql")
    assert diagnosis.kind is errors.EnvironmentFailure and "start the database server" in diagnosis.advice


@pytest.mark.postgres
@pytest.mark.parametrize("change, advice", [({"password": "not-the-password"}, "check the user name and password"),
                                            ({"database": "mlcbench_no_such_db"}, "check the database name")])
def test_a_real_server_refusing_a_login_or_a_database_is_exit_2_with_its_advice(change, advice):
    from sqlalchemy.engine import make_url

    from tests.conftest import NO_POSTGRES, POSTGRES_URL

    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    url = make_url(POSTGRES_URL).set(**change).render_as_string(hide_password=False)
    one_error_line(runner.invoke(app, ["results", "--db", url]), ExitCode.USAGE, advice)


def test_a_full_disk_where_the_store_would_be_made_is_exit_1(tmp_path, monkeypatch, no_runs):
    import errno

    folder = tmp_path / "full" / "disk"
    make = Path.mkdir

    def full(self: Path, *args, **kwargs):
        if self == folder:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return make(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", full)
    one_error_line(runner.invoke(app, [*TINY, "--db", str(folder / "store.db"), "--workdir", str(tmp_path / "w")]),
                   ExitCode.ENVIRONMENT, f"cannot create the result store {folder / 'store.db'}: No space left on device")
    assert no_runs == []
