"""calibrations: the ceilings (copy bandwidth, matmul rate) each sweep measured on each GPU

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "calibrations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sweep_id", sa.String(128), index=True),
        sa.Column("env", sa.String(64)),
        sa.Column("gpu_tag", sa.String(64), index=True),
        sa.Column("gpu_uuid", sa.String(64)),
        sa.Column("measured_at", sa.DateTime(timezone=True)),
        sa.Column("calibration_json", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("calibrations")
