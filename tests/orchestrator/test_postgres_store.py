"""The shared store on a real PostgreSQL (URL in MLCBENCH_TEST_POSTGRES_URL, see .ci/postgres-setup.sh)."""

import os
import subprocess
import sys
import threading
import uuid

import pytest
from sqlalchemy import create_engine, text

from mlcbench.orchestrator.store import Store
from mlcbench.schema import JobSpec, Result

POSTGRES_URL = os.environ.get("MLCBENCH_TEST_POSTGRES_URL")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="MLCBENCH_TEST_POSTGRES_URL is unset; "
                                                "run `eval \"$(bash .ci/postgres-setup.sh | tail -1)\"` first"),
]


@pytest.fixture
def schema_url():
    """A fresh PostgreSQL schema per test (search_path), dropped afterwards: tests never see each other's rows."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {name}"))
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{name}"
    with admin.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {name} CASCADE"))
    admin.dispose()


def test_put_replaces_the_row_of_the_same_key_and_reads_back_the_whole_result(schema_url):
    store = Store(schema_url)
    job = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu")
    for status in ("crashed", "ok"):
        result = Result(job_id=job.job_id, job=job, status=status)
        store.put(result.model_copy(update={"provenance": result.provenance.model_copy(
            update={"env": "local", "gpu_tag": "cpu"})}), sweep_id=status)
    [row] = store.rows()
    assert (row.status, row.sweep_id, row.result().job) == ("ok", "ok", job)


def test_two_orchestrators_sweeping_into_one_store_at_once_leave_one_row_per_job(schema_url, tmp_path):
    command = [sys.executable, "-m", "mlcbench.orchestrator", "sweep", "--suite", "tiny", "--db", schema_url]
    environment = dict(os.environ)
    processes = [subprocess.Popen([*command, "--workdir", str(tmp_path / f"work-{n}")], cwd=tmp_path, text=True,
                                  env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for n in range(2)]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs

    rows = Store(schema_url).rows()
    assert len(rows) == 8 == len({(row.job_id, row.env, row.gpu_tag) for row in rows})
    assert all(row.status == "ok" for row in rows)


def test_orchestrators_opening_a_new_store_at_once_migrate_it_once(schema_url):
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_store() -> None:
        barrier.wait()
        try:
            Store(schema_url)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_store, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "migrations of concurrent openers deadlocked"
    assert errors == []
    with Store(schema_url).engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0002"]
