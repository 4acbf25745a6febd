"""The shared store on a real PostgreSQL (URL in MLCBENCH_TEST_POSTGRES_URL, see .ci/postgres-setup.sh)."""

import os
import subprocess
import sys
import threading
import uuid

import pytest
from alembic import command
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mlcbench.orchestrator import sweep as sweeping
from mlcbench.orchestrator.errors import EnvironmentFailure
from mlcbench.orchestrator.gpu import Target
from mlcbench.orchestrator.runtimes.simulated import SimulatedRuntime
from mlcbench.orchestrator.store import Store
from mlcbench.orchestrator.store.database import ResultRow, _alembic_config, _columns
from mlcbench.orchestrator.suites import get_suite
from mlcbench.schema import JobSpec, Result
from tests.conftest import NO_POSTGRES, POSTGRES_URL
from tests.orchestrator.stores import HEAD, tagged

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason=NO_POSTGRES),
]


def test_put_keeps_every_attempt_and_the_cell_result_is_the_ok_one(schema_url):
    store = Store(schema_url)
    job = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu")
    for status in ("crashed", "ok", "failed"):
        result = Result(job_id=job.job_id, job=job, status=status)
        store.put(result.model_copy(update={"provenance": result.provenance.model_copy(
            update={"env": "local", "gpu_tag": "cpu"})}), sweep_id=status)
    assert [(row.status, row.sweep_id) for row in store.rows()] == [("crashed", "crashed"), ("ok", "ok"),
                                                                     ("failed", "failed")]
    [cell] = store.cells()
    assert (cell.status, cell.job) == ("ok", job)


def test_two_orchestrators_sweeping_into_one_store_at_once_leave_one_ok_result_per_job(schema_url, tmp_path):
    command = [sys.executable, "-m", "mlcbench.orchestrator", "sweep", "--suite", "tiny", "--db", schema_url]
    environment = dict(os.environ)
    processes = [subprocess.Popen([*command, "--workdir", str(tmp_path / f"work-{n}")], cwd=tmp_path, text=True,
                                  env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for n in range(2)]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    password = make_url(POSTGRES_URL).password
    assert all(password not in output and "store postgresql+psycopg://mlcbench:***@" in output for output in outputs)

    cells = Store(schema_url).cells()
    assert len(cells) == 8 == len({(cell.job_id, cell.provenance.env, cell.provenance.gpu_tag) for cell in cells})
    assert all(cell.status == "ok" for cell in cells)


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
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD]


def test_a_store_at_revision_0002_is_upgraded_in_place_to_keep_history(schema_url):
    job = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu")
    engine = create_engine(schema_url)
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0002")
    engine.dispose()
    with engine.begin() as connection:  # one row per cell, as the mlcbench of revision 0002 wrote it
        connection.execute(ResultRow.__table__.insert().values(**_columns(tagged(job, "ok"))))
    engine.dispose()

    store = Store(schema_url)
    store.put(tagged(job, "crashed", minute=1))
    assert [row.status for row in store.rows()] == ["ok", "crashed"]
    assert [cell.status for cell in store.cells()] == ["ok"]


def test_the_database_going_down_mid_sweep_ends_it_with_an_environment_failure_and_keeps_what_was_stored(schema_url,
                                                                                                     tmp_path):
    name = f"mlcbench-down-{uuid.uuid4().hex[:8]}"
    url = f"{schema_url}&application_name={name}"
    store = Store(url)

    class CutTheConnectionAtTheFirstResult(sweeping.SweepListener):
        def job_done(self, result) -> None:
            admin = create_engine(POSTGRES_URL)
            with admin.begin() as connection:
                connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                        "WHERE application_name = :name"), {"name": name})
            admin.dispose()

    options = sweeping.SweepOptions(suite=get_suite("tiny"), env_names=["local"], workdir=tmp_path / "work",
                                    target=Target(tag="cpu", device="cpu", gpus=()))
    with pytest.raises(EnvironmentFailure, match="cannot write to the result store postgresql.*:\\*\\*\\*@"):
        sweeping.run(options, store, CutTheConnectionAtTheFirstResult(),
                     runtime_factory=lambda env, _o, _g: SimulatedRuntime(env, lambda job: 0.05))
    assert len(Store(schema_url).rows()) == 1
