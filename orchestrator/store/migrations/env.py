"""Alembic environment: migrations run on the connection the store hands over (no alembic.ini, no URL here)."""

from alembic import context

from mlcbench.orchestrator.store.database import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
