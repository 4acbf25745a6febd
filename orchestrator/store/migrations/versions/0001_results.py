"""results table

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.String(32), nullable=False, index=True),
        sa.Column("env", sa.String(64), nullable=False, index=True),
        sa.Column("gpu_tag", sa.String(64), nullable=False, index=True),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("workflow", sa.String(64), nullable=False),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("batch_size", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("median_ms", sa.Float),
        sa.Column("tokens_per_s", sa.Float),
        sa.Column("tflops", sa.Float),
        sa.Column("compile_s", sa.Float),
        sa.Column("peak_mem_bytes", sa.BigInteger),
        sa.Column("correct", sa.Boolean),
        sa.Column("gpu_uuid", sa.String(64)),
        sa.Column("gpu_index", sa.Integer),
        sa.Column("image_digest", sa.String(128)),
        sa.Column("git_rev", sa.String(64)),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result_json", sa.Text, nullable=False),
        sa.UniqueConstraint("job_id", "env", "gpu_tag", name="uq_result_job_env_gpu"),
    )


def downgrade() -> None:
    op.drop_table("results")
