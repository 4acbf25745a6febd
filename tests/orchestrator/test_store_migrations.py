"""The store's schema moves only through Alembic: an older store is upgraded in place with its rows, a newer one is
refused; writes from several threads land once each."""

import threading

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from mlcbench.orchestrator.errors import UsageError
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.database import _alembic_config
from mlcbench.schema import JobSpec, Result

JOB = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu", warmup=0, repeats=1)


def tagged(job: JobSpec, status: str = "ok") -> Result:
    result = Result(job_id=job.job_id, job=job, status=status)
    return result.model_copy(update={"provenance": result.provenance.model_copy(update={"env": "local",
                                                                                        "gpu_tag": "cpu"})})


def test_a_store_at_revision_0001_with_rows_is_upgraded_in_place_and_keeps_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0001")
        connection.execute(text(
            "INSERT INTO results (job_id, env, gpu_tag, model, workflow, precision, batch_size, status, stored_at, "
            "result_json) VALUES (:job_id, 'local', 'cpu', 'matmul-small', 'eager', 'fp32', 1, 'ok', "
            "'2025-01-01 00:00:00', :json)"), {"job_id": JOB.job_id, "json": tagged(JOB).model_dump_json()})
    assert "sweep_id" not in {column["name"] for column in inspect(engine).get_columns("results")}
    engine.dispose()

    store = Store(url)

    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0002"
    assert "sweep_id" in {column["name"] for column in inspect(store.engine).get_columns("results")}
    [row] = store.rows()
    assert (row.job_id, row.status, row.sweep_id) == (JOB.job_id, "ok", None)
    assert row.result() == tagged(JOB)
    assert store.statuses("local", "cpu") == {JOB.job_id: "ok"}  # resume still sees the old row


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


def test_puts_from_several_threads_each_land_once_and_a_put_replaces_its_key(tmp_path):
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
    assert sorted(row.job_id for row in rows) == sorted(job.job_id for job in jobs)
    assert all(row.sweep_id == row.status for row in rows)
