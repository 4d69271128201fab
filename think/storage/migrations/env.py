"""Alembic environment: runs migrations on the connection `think.storage.migrate` hands in."""

from __future__ import annotations

from alembic import context

from think.storage._tables import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
