"""The store's schema moves only through Alembic: an older store is upgraded in place with its rows, a newer one is
refused; every attempt is kept, writes from several threads land once each, and the result of a cell is its latest ok
attempt, else its latest final one, else its latest."""

import threading

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.store import Store
from tests.orchestrator.stores import HEAD, JOB, old_store, tagged


def test_a_store_at_revision_0001_with_rows_is_upgraded_in_place_and_keeps_them(tmp_path):
    url = f"sqlite:///{old_store(tmp_path / 'old.db')}"
    engine = create_engine(url)
    assert "sweep_id" not in {column["name"] for column in inspect(engine).get_columns("results")}
    engine.dispose()

    store = Store(url)

    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
    assert "sweep_id" in {column["name"] for column in inspect(store.engine).get_columns("results")}
    [row] = store.rows()
    assert (row.job_id, row.status, row.sweep_id) == (JOB.job_id, "ok", None)
    assert row.result() == tagged(JOB)
    assert [cell.status for cell in store.cells(env="local", gpu_tag="cpu")] == ["ok"]  # resume sees the old row
    store.put(tagged(JOB, "crashed", minute=5))  # the old one-row-per-cell key is gone: a second attempt is kept
    assert [row.status for row in store.rows()] == ["ok", "crashed"]


def test_a_store_at_an_unknown_newer_revision_is_refused_untouched(tmp_path):
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    Store(url).put(tagged(JOB))
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(UsageError, match="schema revision 0099, unknown to this mlcbench"):
        Store(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0099"
        assert connection.execute(text("SELECT count(*) FROM results")).scalar() == 1


def test_puts_from_several_threads_each_land_once(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    jobs = [JOB.model_copy(update={"batch_size": batch}) for batch in range(1, 41)]

    def put_all(status: str) -> None:
        for job in jobs:
            store.put(tagged(job, status), sweep_id=status)

    threads = [threading.Thread(target=put_all, args=(status,)) for status in ("failed", "ok", "crashed", "ok")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = store.rows()
    assert sorted(row.job_id for row in rows) == sorted(job.job_id for job in jobs for _ in range(4))
    assert all(row.sweep_id == row.status for row in rows)
    assert {cell.status for cell in store.cells()} == {"ok"} and len(store.cells()) == len(jobs)


@pytest.mark.parametrize("attempts, chosen", [
    ([("ok", 0), ("crashed", 1)], ("ok", 0)),  # a crash after a good run hides nothing
    ([("ok", 0), ("ok", 2), ("failed", 3)], ("ok", 2)),  # the latest ok
    ([("ok", 5), ("ok", 2)], ("ok", 5)),  # latest by when it ended, not by when it was stored (merged stores)
    ([("failed", 0), ("unsupported", 1), ("timeout", 2)], ("unsupported", 1)),  # no ok: the latest final one
    ([("failed", 0), ("oom", 4), ("crashed", 2)], ("oom", 4)),  # nothing final: the latest
])
def test_the_result_of_a_cell_is_its_latest_ok_else_latest_final_else_latest_attempt(tmp_path, attempts, chosen):
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    other = JOB.model_copy(update={"batch_size": 2})
    store.put(tagged(other, "crashed", minute=9))
    for status, minute in attempts:
        store.put(tagged(JOB, status, minute=minute, reason=f"attempt {minute}"))

    cells = {cell.job_id: cell for cell in store.cells()}
    assert (cells[JOB.job_id].status, cells[JOB.job_id].reason) == (chosen[0], f"attempt {chosen[1]}")
    assert cells[other.job_id].status == "crashed"
    assert len(store.history()) == len(attempts) + 1
    assert [cell.job_id for cell in store.cells(status=chosen[0])] == [JOB.job_id]  # by the cell's result
    assert store.cells(status="crashed") == [cells[other.job_id]]



def test_a_migration_that_fails_half_way_leaves_a_store_the_next_run_migrates(tmp_path, monkeypatch):
    """SQLite's driver commits before DDL on its own; a sweep killed inside the migrations of a new store must not
    leave a table that the next run's migrations cannot create again."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    upgrade = command.upgrade

    def killed_after_the_first_revision(config, revision):
        upgrade(config, "0001")
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "upgrade", killed_after_the_first_revision)
    with pytest.raises(KeyboardInterrupt):
        Store(url)
    monkeypatch.setattr(command, "upgrade", upgrade)
    store = Store(url)
    store.put(tagged(JOB))
    assert [cell.status for cell in store.cells()] == ["ok"]
