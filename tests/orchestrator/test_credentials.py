"""A store URL's password, in every form a user may write it (user-info, a password query parameter, a password holding
an unencoded '@'), never reaches a printed line, an error, a stored row, a report or a Slurm submission."""

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.errors import ExitCode
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import safe_url
from mlcbench.orchestrator.store.redaction import url_secrets
from mlcbench.schema import Result
from tests.conftest import NO_POSTGRES, POSTGRES_URL
from tests.orchestrator.test_hostile_cli import TINY, one_error_line

runner = CliRunner()
PASSWORD = "Pw1x9Tail9z"
# a password holding '@': its head and tail, each of which must stay hidden
HEAD, TAIL = "Pw1xHead", "Tail9zq"
FORMS = {
    "user-info": f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:1/db",
    "query": f"postgresql+psycopg://u@127.0.0.1:1/db?password={PASSWORD}",
    "query among others": f"postgresql+psycopg://u@127.0.0.1:1/db?sslmode=disable&password={PASSWORD}&x=1",
    "percent-encoded": f"postgresql+psycopg://u:{PASSWORD}%2F@127.0.0.1:1/db",
    "unencoded @": f"postgresql+psycopg://u:{HEAD}@{TAIL}@127.0.0.1:1/db",
    "unencoded /": f"postgresql+psycopg://u:{HEAD}/{TAIL}@127.0.0.1:1/db",
}


def leaks(text: str) -> list[str]:
    return [secret for secret in (PASSWORD, HEAD, TAIL) if secret in text]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_password_is_masked_in_the_shown_url(form):
    url = FORMS[form]
    assert url_secrets(url) and leaks(safe_url(url)) == []
    assert "127.0.0.1:1/db" in safe_url(url)  # the rest stays readable


def test_a_url_without_a_password_is_shown_as_it_is():
    for url in ("sqlite:///results/a@b:c.db", "postgresql+psycopg://u@host/db?sslmode=require", "not a url"):
        assert safe_url(url) == url


@pytest.mark.parametrize("command", [["sweep", *TINY[1:]], ["results"], ["report"], ["export"],
                                     ["compare", "--env", "a", "--env", "b"]])
@pytest.mark.parametrize("form", FORMS)
def test_an_error_never_shows_the_password(tmp_path, command, form):
    workdir = ["--workdir", str(tmp_path / "w")] if command[0] == "sweep" else []
    done = runner.invoke(app, [*command, "--db", FORMS[form], *workdir])
    assert done.exit_code in (ExitCode.ENVIRONMENT, ExitCode.USAGE), done.output
    assert done.stderr.startswith("error: ") and "Traceback" not in done.output
    assert leaks(done.output) == []


def test_a_password_holding_an_unencoded_at_is_refused_without_its_tail_taken_for_the_host():
    one_error_line(runner.invoke(app, ["results", "--db", FORMS["unencoded @"]]), ExitCode.USAGE,
                   "its password holds an '@'; write it as %40")


def _sweep_and_report(tmp_path: Path, monkeypatch, url: str, password: str) -> tuple[list[str], list[str]]:
    """A sweep whose one job fails echoing the password, then every command that shows or writes the store:
    (what was printed, what was written)."""
    echoing = lambda job: Result.without_run(job, "failed", f"the database said {password}")  # noqa: E731
    monkeypatch.setattr(sweeping, "make_runtime",
                        lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0, answer=echoing))
    swept = runner.invoke(app, [*TINY, "--db", url, "--workdir", str(tmp_path / "w")])
    assert swept.exit_code == ExitCode.JOBS_FAILED, swept.output
    printed = [swept.output]
    for command in (["results"], ["results", "--history"], ["export"], ["export", "--format", "json"],
                    ["report", "--markdown", str(tmp_path / "r.md"), "--html", str(tmp_path / "html")]):
        done = runner.invoke(app, [*command, "--db", url])
        assert done.exit_code == 0, done.output
        printed.append(done.output)
    return printed, [(tmp_path / "r.md").read_text(), (tmp_path / "html" / "index.html").read_text()]


def test_a_sweep_and_every_report_of_a_store_with_a_password_query_keep_it_hidden(tmp_path, monkeypatch):
    """SQLite takes (and ignores) a password query parameter: the whole path, sweep to HTML, runs here."""
    url = f"sqlite:///{tmp_path / 'store.db'}?password={PASSWORD}"
    printed, written = _sweep_and_report(tmp_path, monkeypatch, url, PASSWORD)
    assert "password=***" in printed[0] and "password=***" in written[0]
    stored = "\n".join(sqlite3.connect(tmp_path / "store.db").iterdump())
    assert "the database said ***" in stored
    assert [leaks(text) for text in [*printed, *written, stored]] == [[]] * (len(printed) + len(written) + 1)


def _password_given_as(form: str, schema_url: str) -> tuple[str, str]:
    """The test server's URL with its password in the user-info or as a query parameter, and the password."""
    url = make_url(schema_url)
    if not url.password:
        pytest.skip("MLCBENCH_TEST_POSTGRES_URL has no password to hide")
    given = (url.render_as_string(hide_password=False) if form == "user-info"
             else url.set(password=None).update_query_dict({"password": url.password}).render_as_string(False))
    return given, url.password


@pytest.mark.postgres
@pytest.mark.parametrize("form", ["user-info", "query"])
def test_a_sweep_and_every_report_of_a_postgres_store_keep_its_password_hidden(tmp_path, monkeypatch, schema_url,
                                                                               form):
    from sqlalchemy import create_engine, text

    given, secret = _password_given_as(form, schema_url)
    printed, written = _sweep_and_report(tmp_path, monkeypatch, given, secret)
    engine = create_engine(schema_url)
    with engine.connect() as connection:
        stored = "\n".join(connection.execute(text("SELECT result_json FROM results")).scalars())
    engine.dispose()
    assert "the database said ***" in stored
    assert [secret in text for text in [*printed, *written, stored]] == [False] * (len(printed) + len(written) + 1)


def _fake_sbatch(tmp_path: Path, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("sbatch", script), ("squeue", "exit 0")):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.postgres
@pytest.mark.parametrize("form", ["user-info", "query"])
def test_a_slurm_submission_and_the_reports_of_a_postgres_store_keep_its_password_hidden(tmp_path, mlcbench,
                                                                                      schema_url, form):
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    given, secret = _password_given_as(form, schema_url)
    env = _fake_sbatch(tmp_path, f'echo "$@" > {tmp_path / "sbatch-args"}; echo 4242')
    done = mlcbench("sweep", "--runtime", "slurm", "--gpu", "cpu", "--suite", "tiny", "--model", "matmul-small",
                    "--db", given, "--workdir", "work", env=env)
    assert done.returncode == 0, done.stderr
    assert "Slurm array 4242" in done.stdout
    refused = mlcbench("sweep", "--runtime", "slurm", "--gpu", "cpu", "--suite", "tiny", "--model", "matmul-small",
                       "--db", given, "--workdir", "work2", "--rerun",
                       env=_fake_sbatch(tmp_path, f'echo "sbatch: error: bad {secret}" >&2; exit 1'))
    assert refused.returncode != 0
    texts = [done.stdout, done.stderr, (tmp_path / "sbatch-args").read_text(), refused.stdout, refused.stderr]
    for command in (["results"], ["report", "--markdown", "-"]):
        shown = mlcbench(*command, "--db", given)
        assert shown.returncode == 0, shown.stderr
        texts += [shown.stdout, shown.stderr]
    assert [secret in text for text in texts] == [False] * len(texts)
    shutil.rmtree(tmp_path / "work", ignore_errors=True)


def test_a_slurm_submission_keeps_the_password_out_of_what_it_prints_and_hands_sbatch(tmp_path, monkeypatch):
    """SQLite let through (a real submission needs a server store, tested with PostgreSQL in CI): what is printed,
    sbatch's command line, and a refusal's error (sbatch's own words included) hold no password; the plan file that
    tasks read holds the store's URL, readable by its owner only."""
    from mlcbench.orchestrator import cli
    from mlcbench.orchestrator.runtimes import slurm

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def install(sbatch: str) -> None:
        for name, body in (("sbatch", sbatch), ("squeue", "exit 0")):
            (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_dir / name).chmod(0o755)

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(cli, "refuse_sqlite", lambda url: None)
    monkeypatch.setattr(slurm, "refuse_sqlite", lambda url: None)
    url = f"sqlite:///{tmp_path / 'store.db'}?password={PASSWORD}"
    submit = ["sweep", "--runtime", "slurm", "--gpu", "cpu", "--suite", "tiny", "--model", "matmul-small", "--db", url,
              "--workdir", str(tmp_path / "work"), "--rerun"]
    install(f'echo "$@" > {tmp_path / "argv"}; echo 77')
    done = runner.invoke(app, submit)
    assert done.exit_code == 0 and "Slurm array 77" in done.stdout, done.output
    [plan] = (tmp_path / "work").glob("slurm-*/plan.json")
    assert stat.S_IMODE(plan.stat().st_mode) == 0o600
    install(f'echo "sbatch: error: cannot reach {PASSWORD}" >&2; exit 1')
    refused = runner.invoke(app, submit)
    assert refused.exit_code == ExitCode.USAGE
    assert "sbatch: error: cannot reach ***" in refused.stderr
    texts = [done.output, (tmp_path / "argv").read_text(), refused.output]
    assert [leaks(text) for text in texts] == [[]] * len(texts)


def test_compare_names_two_stores_with_passwords_without_them(tmp_path):
    from tests.orchestrator.test_hostile_cli import store_of

    first, _ = store_of(tmp_path / "a")
    second, _ = store_of(tmp_path / "b")
    password = "dotted.Pw1x9Tail9z"
    done = runner.invoke(app, ["compare", "--db", f"sqlite:///{first}?password={password}", "--against",
                               f"sqlite:///{second}?password={password}"])
    assert done.exit_code == 0, done.output
    assert "dotted" not in done.output and "Pw1x9Tail9z" not in done.output


@pytest.mark.parametrize("password", ["p", "db", "eager"])
def test_a_short_password_is_masked_where_it_stands_and_breaks_nothing_else(tmp_path, monkeypatch, password):
    """Searched for in any text, "p" would mask every p of every word and break a stored result's JSON."""
    url = f"sqlite:///{tmp_path / 'store.db'}?password={password}"
    assert safe_url(url) == f"sqlite:///{tmp_path / 'store.db'}?password=***"
    assert safe_url(f"postgresql+psycopg://u:{password}@host/db") == "postgresql+psycopg://u:***@host/db"
    monkeypatch.setattr(sweeping, "make_runtime", lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.0))
    swept = runner.invoke(app, [*TINY, "--batch-size", "1", "--db", url, "--workdir", str(tmp_path / "w")])
    assert swept.exit_code == 0, swept.output
    listed = runner.invoke(app, ["results", "--db", url])
    assert listed.exit_code == 0 and "matmul-small" in listed.stdout and "eager" in listed.stdout


@pytest.mark.parametrize("form", ["--db", "--db="])
def test_the_resume_line_of_an_interrupted_sweep_masks_the_password(tmp_path, monkeypatch, form):
    monkeypatch.setattr(sweeping, "run", lambda *args, **kwargs: sweeping.SweepReport(interrupted=True))
    url = f"sqlite:///{tmp_path / 'store.db'}?password=zq"
    db = [f"--db={url}"] if form == "--db=" else ["--db", url]
    monkeypatch.setattr("sys.argv", ["mlcbench", *TINY, *db])
    done = runner.invoke(app, [*TINY, *db, "--workdir", str(tmp_path / "w")])
    assert done.exit_code == ExitCode.INTERRUPTED, done.output
    assert "to resume, run the same command again" in done.stderr and "password=***" in done.stderr
    assert "zq" not in done.output


def test_a_sweep_that_ends_at_its_rounds_says_how_to_go_on_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.setattr(sweeping, "run", lambda *args, **kwargs: sweeping.SweepReport(cells_short=3))
    url = f"sqlite:///{tmp_path / 'store.db'}?password=zq"
    monkeypatch.setattr("sys.argv", ["mlcbench", *TINY, "--rounds", "1", "--db", url])
    done = runner.invoke(app, [*TINY, "--rounds", "1", "--db", url, "--workdir", str(tmp_path / "w")])
    assert done.exit_code == 0, done.output
    assert "stopped after 1 round(s) (--rounds): 3 cell(s) want more processes" in done.stdout
    assert "run the same command again" in done.stdout and "interrupted" not in done.output and "zq" not in done.output
