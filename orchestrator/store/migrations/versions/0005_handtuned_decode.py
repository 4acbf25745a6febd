"""handtuned_decode: the rows of torch_compile_decode jobs that ran mlcbench's own Triton kernels are that row's

Before the hand-written kernels had a catalog row of their own, they were options of torch_compile_decode. The result
JSON stays as stored (schema/legacy.py reads such a job as handtuned_decode, and its job id stays); only the workflow column,
which the store's filters select on, follows it.

Revision ID: 0005
Revises: 0004
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_KERNELS = ("triton_gemv", "triton_attention", "triton_gemm")
_results = sa.table("results", sa.column("id", sa.Integer), sa.column("workflow", sa.String),
                    sa.column("result_json", sa.Text))


def _move(source: str, target: str, kernels_on: bool) -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.select(_results.c.id, _results.c.result_json).where(_results.c.workflow == source))
    moved = [row.id for row in rows
             if any(json.loads(row.result_json)["job"].get("options", {}).get(name) for name in _KERNELS) == kernels_on]
    if moved:
        bind.execute(_results.update().where(_results.c.id.in_(moved)).values(workflow=target))


def upgrade() -> None:
    _move("torch_compile_decode", "handtuned_decode", kernels_on=True)


def downgrade() -> None:
    _move("handtuned_decode", "torch_compile_decode", kernels_on=True)
