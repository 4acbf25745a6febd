"""Helpers for the store tests: results tagged with their cell, the newest schema revision."""

from datetime import datetime, timedelta, timezone

from alembic.script import ScriptDirectory

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
