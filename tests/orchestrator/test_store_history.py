"""A good result is never lost: a sweep keeps every attempt and a later crash does not hide an ok; an unreadable row
breaks nothing but itself; a merge is one transaction."""


import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.base import Runtime, WorkerFiles
from mlcbench.orchestrator.runtimes.simulated import KILLED, SimulatedRuntime
from mlcbench.orchestrator.store import Store, database
from mlcbench.orchestrator.store.merge import merge
from mlcbench.orchestrator.suites import get_suite
from tests.conftest import EndedWorker
from tests.orchestrator.stores import JOB, tagged

runner = CliRunner()


class KillingRuntime(Runtime):
    """Its workers are SIGKILLed as soon as they start."""

    def start_worker(self, files: WorkerFiles) -> EndedWorker:
        return EndedWorker(exit_code=KILLED)


def sweep_once(tmp_path, store: Store, runtime: type, rerun: bool) -> sweeping.SweepReport:
    options = sweeping.SweepOptions(
        suite=get_suite("tiny"), env_names=["local"], target=Target(tag="cpu", device="cpu", gpus=()),
        filters=sweeping.Filters(models=["matmul-small"], batch_sizes=[1]), rerun=rerun, workdir=tmp_path / "work")
    factory = (lambda env, _o, _g: SimulatedRuntime(env, seconds=lambda job: 0.0)) if runtime is SimulatedRuntime \
        else (lambda env, _o, _g: KillingRuntime(env))
    return sweeping.run(options, store, runtime_factory=factory)


def test_a_rerun_whose_worker_is_killed_keeps_the_ok_result_and_history_shows_both(tmp_path):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(db)
    assert [r.status for r in sweep_once(tmp_path, store, SimulatedRuntime, rerun=False).stored] == ["ok"]
    assert [r.status for r in sweep_once(tmp_path, store, KillingRuntime, rerun=True).stored] == ["crashed"]

    [cell] = store.cells()
    assert cell.status == "ok"
    assert [r.status for r in store.history()] == ["ok", "crashed"]
    assert sweep_once(tmp_path, store, KillingRuntime, rerun=False).skipped == 1  # resume sees the ok

    listed = runner.invoke(app, ["results", "--db", db])
    assert listed.exit_code == 0 and "1 stored result(s)" in listed.output and "crashed" not in listed.output
    history = runner.invoke(app, ["results", "--db", db, "--history"])
    assert history.exit_code == 0 and "2 stored attempt(s)" in history.output and "crashed" in history.output


def corrupt(store: Store, row_id: int) -> None:
    with store.engine.begin() as connection:
        connection.execute(text("UPDATE results SET result_json = '{' WHERE id = :id"), {"id": row_id})


@pytest.mark.parametrize("command", [["results"], ["report"], ["export", "--format", "csv"],
                                     ["compare", "--env", "local", "--env", "other"]])
def test_an_unreadable_row_is_skipped_and_named_and_the_others_are_shown(tmp_path, command):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(db)
    for batch in (1, 2, 4):
        for env in ("local", "other"):
            store.put(tagged(JOB.model_copy(update={"batch_size": batch}), env=env))
    corrupt(store, 2)

    done = runner.invoke(app, [*command, "--db", db])
    assert done.exit_code == 0, done.output
    assert done.stderr.startswith("warning: skipped 1 unreadable row(s) of ") and "(id 2)" in done.stderr
    assert "Traceback" not in done.output
    if command[0] == "export":
        assert len(done.stdout.splitlines()) == 1 + 5  # header and the five readable rows


def test_a_merge_that_fails_half_way_leaves_the_target_as_it_was(tmp_path, monkeypatch):
    source, target = Store(f"sqlite:///{tmp_path / 's.db'}"), Store(f"sqlite:///{tmp_path / 't.db'}")
    for batch in range(1, 9):
        source.put(tagged(JOB.model_copy(update={"batch_size": batch})))
    target.put(tagged(JOB, "crashed", minute=3))
    columns, calls = database._columns, []

    def fail_on_the_fifth(result):
        calls.append(result)
        if len(calls) == 5:
            raise OSError("disk full")
        return columns(result)

    monkeypatch.setattr(database, "_columns", fail_on_the_fifth)
    with pytest.raises(OSError):
        merge([source], target)
    assert [row.status for row in target.rows()] == ["crashed"]

    monkeypatch.setattr(database, "_columns", columns)
    counts = merge([source], target)
    assert (counts.added, counts.new_cells, counts.changed_cells) == (8, 7, 1)
    assert len(target.rows()) == 9 and {cell.status for cell in target.cells()} == {"ok"}


def test_merge_skips_and_names_an_unreadable_source_row_and_copies_the_rest(tmp_path):
    source = tmp_path / "s.db"
    store = Store(f"sqlite:///{source}")
    for batch in range(1, 9):
        store.put(tagged(JOB.model_copy(update={"batch_size": batch})))
    corrupt(store, 5)
    done = runner.invoke(app, ["merge", str(source), "--into", str(tmp_path / "t.db")])
    assert done.exit_code == 0, done.output
    assert "7 attempt(s) added" in done.stdout and "(id 5)" in done.stderr
    assert len(Store(f"sqlite:///{tmp_path / 't.db'}").rows()) == 7
