"""Messengers (issue 34): chat platforms' webhooks in, replies out.

- `messenger_events`: each update or event id a messenger's webhook accepted, per (tenant,
  agent, messenger): the dedupe that makes a platform's retries (and a storm of the same
  update) change nothing. Claimed with `ON CONFLICT DO NOTHING` before the event is handled,
  `done` once its turn and delivery are recorded; a copy that finds it claimed but not done
  waits a moment, then takes over (every step after the claim is idempotent).
- `messenger_threads`: a chat thread → its conversation, and whether a mention subscribed it.
- `messenger_deliveries`: one reply (or notice) to post in a thread, with its stage
  (`accepted` → `streaming` → `completed`, or `interrupted`, `merged`, `failed`) and the
  platform message ids sent so far. The stage is what a recovered delivery decides from: not
  begun, send; begun, post the interruption notice, never a second partial.
- `messenger_buttons`: an approval posted as buttons: its id → the turn that asked, so a press
  becomes the same decision as `POST …/approvals/{id}`.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0021"
down_revision = "0020"


def _now() -> sa.Column[datetime]:
    return sa.Column(
        "created_at",
        sa.DateTime(timezone=True),
        nullable=False,
        server_default=sa.func.clock_timestamp(),
    )


def upgrade() -> None:
    op.create_table(
        "messenger_events",
        sa.Column("tenant", sa.String, primary_key=True),
        sa.Column("agent", sa.String, primary_key=True),
        sa.Column("messenger", sa.String, primary_key=True),
        sa.Column("event_id", sa.String, primary_key=True),
        sa.Column("turn_id", sa.String),
        sa.Column("done", sa.Boolean, nullable=False, server_default=sa.false()),
        _now(),
    )
    op.create_table(
        "messenger_threads",
        sa.Column("tenant", sa.String, primary_key=True),
        sa.Column("agent", sa.String, primary_key=True),
        sa.Column("messenger", sa.String, primary_key=True),
        sa.Column("thread_key", sa.String, primary_key=True),
        sa.Column("chat", sa.String, nullable=False),
        sa.Column("thread", sa.String),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("subscribed", sa.Boolean, nullable=False, server_default=sa.false()),
        _now(),
    )
    op.create_index(
        "messenger_threads_conversation",
        "messenger_threads",
        ["tenant", "agent", "messenger", "conversation_id"],
    )
    op.create_table(
        "messenger_deliveries",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("tenant", sa.String, nullable=False),
        sa.Column("agent", sa.String, nullable=False),
        sa.Column("messenger", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("turn_id", sa.String, unique=True),
        sa.Column("chat", sa.String, nullable=False),
        sa.Column("thread", sa.String),
        sa.Column("kind", sa.String, nullable=False, server_default="reply"),
        sa.Column("text", sa.Text),
        sa.Column("stage", sa.String, nullable=False, server_default="accepted"),
        sa.Column("message_ids", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        _now(),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.clock_timestamp(),
        ),
    )
    op.create_index(
        "messenger_deliveries_open",
        "messenger_deliveries",
        ["created_at"],
        postgresql_where=sa.text("stage IN ('accepted', 'streaming')"),
    )
    op.create_table(
        "messenger_buttons",
        sa.Column("approval_id", sa.String, primary_key=True),
        sa.Column("delivery_id", sa.String, nullable=False),
        sa.Column("turn_id", sa.String, nullable=False),
        sa.Column("message_id", sa.String),
        _now(),
    )


def downgrade() -> None:
    op.drop_table("messenger_buttons")
    op.drop_index("messenger_deliveries_open", table_name="messenger_deliveries")
    op.drop_table("messenger_deliveries")
    op.drop_index("messenger_threads_conversation", table_name="messenger_threads")
    op.drop_table("messenger_threads")
    op.drop_table("messenger_events")
