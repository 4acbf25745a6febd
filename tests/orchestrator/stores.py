"""Helpers for the store tests: results tagged with their cell, the newest schema revision."""

from datetime import datetime, timedelta, timezone
from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from mlcbench.orchestrator.store.database import _alembic_config
from mlcbench.schema import JobSpec, Result

JOB = JobSpec(model="matmul-small", workflow="eager", precision="fp32", batch_size=1, device="cpu", warmup=0, repeats=1)
HEAD = ScriptDirectory.from_config(_alembic_config(None)).get_current_head()
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def tagged(job: JobSpec = JOB, status: str = "ok", minute: int = 0, env: str = "local", gpu_tag: str = "cpu",
           **fields) -> Result:
    """A result of `job` in env on gpu_tag that ended `minute` minutes after T0."""
    result = Result(job_id=job.job_id, job=job, status=status, **fields)
    return result.model_copy(update={"provenance": result.provenance.model_copy(update={
        "env": env, "gpu_tag": gpu_tag, "ended_at": T0 + timedelta(minutes=minute)})})


def old_store(path: Path) -> Path:
    """A store at revision 0001 holding one ok row."""
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0001")
        connection.execute(text(
            "INSERT INTO results (job_id, env, gpu_tag, model, workflow, precision, batch_size, status, stored_at, "
            "result_json) VALUES (:job_id, 'local', 'cpu', 'matmul-small', 'eager', 'fp32', 1, 'ok', "
            "'2025-01-01 00:00:00', :json)"), {"job_id": JOB.job_id, "json": tagged(JOB).model_dump_json()})
    engine.dispose()
    return path
