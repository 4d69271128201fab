"""The turn columns a writer may set, and how they become SQL: shared by `Store.update_turn`
and the stream log's `append`, which sets them in the statement that reserves the chunks'
sequence numbers (one round trip where there were two, on every step of every turn)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.types.json import Jsonb

from think._messages import storable_text

TURN_COLUMNS = frozenset(
    {
        "status",
        "started_at",
        "completed_at",
        "parent_id",
        "message",
        "error",
        "steps_done",
        "usage",
        "config",
        "output",
    }
)
"""Columns a caller may set; anything else is a programming error."""
_JSON_COLUMNS = frozenset({"message", "usage", "config", "output"})

NOW = object()
"""Pass as a value for the database's `now()`."""


def assignments(values: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """`column = %(set_column)s` fragments for an UPDATE of `turns`, and their parameters
    (prefixed, so they never collide with the statement's own)."""
    unknown = set(values) - TURN_COLUMNS
    if unknown:
        raise TypeError(f"not turn columns: {sorted(unknown)}")
    fragments: list[str] = []
    params: dict[str, Any] = {}
    for column, value in values.items():
        if value is NOW:
            fragments.append(f"{column} = now()")
            continue
        fragments.append(f"{column} = %(set_{column})s")
        if column in _JSON_COLUMNS:
            value = Jsonb(value)
        elif column == "error" and isinstance(value, str):
            # A `text` column: no `jsonb` backstop here, and an error may quote anything (a
            # provider's message, a tool's input): a NUL in it would fail the turn's last write.
            value = storable_text(value)
        params[f"set_{column}"] = value
    return fragments, params
