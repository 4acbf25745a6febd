"""sweep_id: which sweep (host, process, start time) stored each row

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("sweep_id", sa.String(128)))
        batch.create_index("ix_results_sweep_id", ["sweep_id"])


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_index("ix_results_sweep_id")
        batch.drop_column("sweep_id")
