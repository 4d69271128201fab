"""Postgres storage: schema, migrations and the conversation store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import create_engine

from think._settings import Settings
from think.storage._db import Conn, Database
from think.storage._records import (
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    Conversation,
    TurnRecord,
    TurnRequest,
    TurnStatus,
)
from think.storage._store import NOW, IdempotencyConflict, MessageIdConflict, ParentNotFound, Store

MIGRATIONS = Path(__file__).parent / "migrations"

__all__ = [
    "NOW",
    "PAUSED_STATUSES",
    "TERMINAL_STATUSES",
    "Admission",
    "Conn",
    "Conversation",
    "Database",
    "IdempotencyConflict",
    "MessageIdConflict",
    "ParentNotFound",
    "Store",
    "TurnRecord",
    "TurnRequest",
    "TurnStatus",
    "migrate",
    "migrate_now",
    "open_database",
]


async def open_database(settings: Settings, *, max_size: int = 10) -> Database:
    """The process's one pool. Opened by the app's lifespan or the worker, never at import."""
    return await Database(settings.libpq_url, max_size=max_size).open()


def _migrate_sync(url: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            # One migrator at a time, even when several containers start together.
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7243531)")
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()


def migrate_now(settings: Settings) -> None:
    """`migrate` for callers without an event loop (scripts, the CLI before it starts one)."""
    _migrate_sync(settings.sqlalchemy_url)


async def migrate(settings: Settings) -> None:
    """Bring the schema to the newest migration; safe to run again and concurrently."""
    await asyncio.to_thread(_migrate_sync, settings.sqlalchemy_url)
