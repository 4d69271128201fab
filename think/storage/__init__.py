"""Postgres storage: schema, migrations and the conversation store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from think._settings import Settings
from think.storage._records import (
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    Conversation,
    TurnRecord,
    TurnRequest,
    TurnStatus,
)
from think.storage._store import IdempotencyConflict, MessageIdConflict, ParentNotFound, Store

MIGRATIONS = Path(__file__).parent / "migrations"

__all__ = [
    "PAUSED_STATUSES",
    "TERMINAL_STATUSES",
    "Admission",
    "Conversation",
    "IdempotencyConflict",
    "MessageIdConflict",
    "ParentNotFound",
    "Store",
    "TurnRecord",
    "TurnRequest",
    "TurnStatus",
    "create_engine_for",
    "migrate",
    "migrate_now",
]


def create_engine_for(settings: Settings, *, pool_size: int = 10) -> AsyncEngine:
    """The process's one engine. Created by the app's lifespan or the worker, never at import."""
    return create_async_engine(
        settings.sqlalchemy_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        # No pre-ping: it costs a round trip on every checkout, on the hot path of every
        # activity; recycling old connections and Temporal's retries cover dead ones.
        pool_recycle=1800,
    )


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
