"""Several processes may open and migrate one fresh SQLite store at once; a store opened read-only shows the rows its
write-ahead log holds, or says it cannot."""

import multiprocessing
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from mlcbench.orchestrator.cli import app
from mlcbench.orchestrator.store import Store
from tests.orchestrator.stores import JOB, tagged

runner = CliRunner()

PROCESSES = 4
TRIALS = 20
EXTENSIONS = 30


def _all_at_once(target, arguments: list[tuple]) -> None:
    """target(*args, barrier, errors) in a process per args, released together; none may fail."""
    context = multiprocessing.get_context("fork")
    barrier, errors = context.Barrier(len(arguments)), context.Queue()
    processes = [context.Process(target=target, args=(*args, barrier, errors)) for args in arguments]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    failures = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
    assert failures == [] and [process.exitcode for process in processes] == [0] * len(arguments)


def _open_when_all_are_ready(url: str, barrier, errors) -> None:
    barrier.wait()
    try:
        Store(url).put(tagged(JOB))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which asserts there is none
        errors.put(f"{type(error).__name__}: {error}")


def test_processes_opening_one_fresh_store_at_once_all_migrate_it_and_write(tmp_path):
    """On older code 29 of 60 such opens failed with 'database is locked' (a deferred migration transaction), then 7
    of 360 (switching the fresh file to WAL, which SQLite refuses at once instead of waiting)."""
    for trial in range(TRIALS):
        url = f"sqlite:///{tmp_path / f'store-{trial}.db'}"
        _all_at_once(_open_when_all_are_ready, [(url,)] * PROCESSES)
        assert len(Store(url, create=False).rows()) == PROCESSES


def _store_with_rows_in_its_log(folder: Path, rows: int) -> Path:
    """A store whose last `rows` rows are still in its write-ahead log (-wal), as a killed writer leaves it: copied
    while another connection holds the log open, without its index (-shm)."""
    source = folder / "source"
    source.mkdir()
    store = Store(f"sqlite:///{source / 'store.db'}")
    holder = sqlite3.connect(source / "store.db")  # keeps the log from being folded into the file at close
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for batch_size in range(1, rows + 1):
        store.put(tagged(JOB.model_copy(update={"batch_size": batch_size})))
    store.engine.dispose()
    copy = folder / "copy"
    copy.mkdir()
    for name in ("store.db", "store.db-wal"):
        (copy / name).write_bytes((source / name).read_bytes())
    holder.close()
    assert (copy / "store.db-wal").stat().st_size > 0
    return copy / "store.db"


def test_a_read_only_store_shows_the_rows_in_its_write_ahead_log(tmp_path, immutable):
    path = _store_with_rows_in_its_log(tmp_path, rows=5)
    immutable(path)
    done = runner.invoke(app, ["results", "--db", f"sqlite:///{path}"])
    assert done.exit_code == 0, done.output
    assert "5 stored result(s)" in done.output and "warning" not in done.stderr


def test_a_read_only_store_whose_log_cannot_be_read_says_so(tmp_path, immutable):
    path = _store_with_rows_in_its_log(tmp_path, rows=5)
    immutable(path)
    immutable(path.parent)  # no index (-shm) can be made beside it: SQLite cannot read the log read-only
    done = runner.invoke(app, ["results", "--db", f"sqlite:///{path}"])
    assert done.exit_code == 0, done.output
    assert done.stderr.startswith(f"warning: the result store {path} is read-only and its write-ahead log "
                                  f"store.db-wal cannot be read"), done.stderr
    assert "rows written since its last checkpoint are not shown" in done.stderr


def _extend_own_attempt(url: str, batch_size: int, barrier, errors) -> None:
    store = Store(url)
    result = tagged(JOB.model_copy(update={"batch_size": batch_size}))
    barrier.wait()
    try:
        row_id = store.put_attempt(result)
        for _ in range(EXTENSIONS):
            row_id = store.put_attempt(result, row_id=row_id)  # read back, then written: one transaction
    except Exception as error:  # noqa: BLE001 - reported to the parent, which asserts there is none
        errors.put(f"{type(error).__name__}: {error}")



def test_sweeps_extending_their_attempts_in_one_store_at_once_never_find_it_locked(tmp_path):
    """An attempt grows as its processes finish: read back and rewritten in one transaction. Deferred, such a
    transaction cannot wait for another writer once it has read, and failed 'database is locked'."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    Store(url)
    _all_at_once(_extend_own_attempt, [(url, batch) for batch in range(1, PROCESSES + 1)])
    assert len(Store(url, create=False).rows()) == PROCESSES
