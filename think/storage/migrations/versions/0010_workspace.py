"""A workspace per conversation (`think.storage._workspace`): its files, and the writes of tool
calls already applied, so that a retried call answers what it did instead of doing it again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from think.storage.migrations._columns import conversation_key, timestamp_now

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "workspace_files",
        conversation_key(),
        sa.Column("path", sa.String, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("media_type", sa.String, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        timestamp_now("updated_at"),
    )
    op.create_table(
        "workspace_ops",
        conversation_key(),
        # The tool call's idempotency key (`turn_id:tool_call_id`).
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("result", JSONB, nullable=False),
        timestamp_now("created_at"),
    )


def downgrade() -> None:
    op.drop_table("workspace_ops")
    op.drop_table("workspace_files")
