"""Column declarations that several migrations repeat, written once.

Frozen. A migration is history: what it created must stay exactly what it creates on a new
database, so a builder here is part of every migration that calls it, and changing one would
rewrite all of them at once. A new shape of column gets a new builder (or stays inline in its
migration); these stay as they are. Each builder makes a fresh `Column` per call, since a
column belongs to the one table it is given to.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

__all__ = ["conversation_key", "conversation_ref", "timestamp_now"]


def conversation_key() -> sa.Column[str]:
    """`conversation_uid` as (the first part of) the primary key: the rows of one conversation,
    deleted with it."""
    return sa.Column(
        "conversation_uid",
        sa.String,
        sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
        primary_key=True,
    )


def conversation_ref() -> sa.Column[str]:
    """`conversation_uid` outside the primary key: required, deleted with its conversation."""
    return sa.Column(
        "conversation_uid",
        sa.String,
        sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
        nullable=False,
    )


def timestamp_now(name: str) -> sa.Column[datetime]:
    """A required `timestamptz` column that defaults to the inserting transaction's `now()`
    (`created_at`, `updated_at`)."""
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
