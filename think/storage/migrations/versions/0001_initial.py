"""Conversations, the message tree, turns and stream chunks."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR

from think.storage.migrations._columns import conversation_key, conversation_ref, timestamp_now

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("uid", sa.String, primary_key=True),
        sa.Column("tenant", sa.String, nullable=False),
        sa.Column("agent", sa.String, nullable=False),
        sa.Column("id", sa.String, nullable=False),
        timestamp_now("created_at"),
        sa.Column("active_leaf_id", sa.String),
        sa.Column("metadata", JSONB, nullable=False, server_default="{}"),
        sa.Column("system_prompt", sa.Text),
        sa.Column("config", JSONB, nullable=False, server_default="{}"),
        sa.Column("turn_count", sa.Integer, nullable=False, server_default="0"),
        sa.UniqueConstraint("tenant", "agent", "id", name="conversations_name_key"),
    )
    op.create_table(
        "messages",
        conversation_key(),
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("parent_id", sa.String),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("parts", JSONB, nullable=False),
        sa.Column("metadata", JSONB),
        sa.Column("turn_id", sa.String),
        timestamp_now("created_at"),
        sa.Column("position", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("text_content", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "search",
            TSVECTOR,
            sa.Computed("to_tsvector('english', text_content)", persisted=True),
        ),
        sa.Column("byte_size", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("messages_parent_idx", "messages", ["conversation_uid", "parent_id"])
    op.create_index("messages_search_idx", "messages", ["search"], postgresql_using="gin")
    op.create_table(
        "turns",
        sa.Column("id", sa.String, primary_key=True),
        conversation_ref(),
        sa.Column("agent", sa.String, nullable=False),
        sa.Column("idempotency_key", sa.String),
        sa.Column("request_hash", sa.String, nullable=False),
        sa.Column("request", JSONB, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        timestamp_now("created_at"),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("completed_at", sa.DateTime(timezone=True)),
        sa.Column("message_id", sa.String, nullable=False),
        sa.Column("parent_id", sa.String),
        sa.Column("message", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("steps_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("fences", JSONB, nullable=False, server_default="{}"),
        sa.Column("next_seq", sa.Integer, nullable=False, server_default="0"),
        sa.Column("usage", JSONB, nullable=False, server_default="{}"),
        sa.UniqueConstraint("conversation_uid", "idempotency_key", name="turns_idempotency_key"),
    )
    op.create_index("turns_conversation_idx", "turns", ["conversation_uid", "created_at"])
    op.create_index(
        "turns_completed_idx",
        "turns",
        ["completed_at"],
        postgresql_where=sa.text("completed_at IS NOT NULL"),
    )
    op.create_table(
        "stream_chunks",
        sa.Column("turn_id", sa.String, primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("chunk", JSONB, nullable=False),
        timestamp_now("created_at"),
    )


def downgrade() -> None:
    op.drop_table("stream_chunks")
    op.drop_table("turns")
    op.drop_table("messages")
    op.drop_table("conversations")
