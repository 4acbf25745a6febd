"""history: every attempt of a cell is kept (no unique key on job, env, GPU tag); the result of a cell is chosen on read

Revision ID: 0003
Revises: 0002
"""
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_constraint("uq_result_job_env_gpu", type_="unique")
        batch.create_index("ix_results_cell", ["job_id", "env", "gpu_tag"])


def downgrade() -> None:
    """Back to one row per cell: the attempt stored last of each cell stays, the others are deleted."""
    op.execute("DELETE FROM results WHERE id NOT IN "
               "(SELECT max_id FROM (SELECT max(id) AS max_id FROM results GROUP BY job_id, env, gpu_tag) AS last)")
    with op.batch_alter_table("results") as batch:
        batch.drop_index("ix_results_cell")
        batch.create_unique_constraint("uq_result_job_env_gpu", ["job_id", "env", "gpu_tag"])
