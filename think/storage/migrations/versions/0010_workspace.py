"""A workspace per conversation (`think.storage._workspace`): its files, and the writes of tool
calls already applied, so that a retried call answers what it did instead of doing it again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "workspace_files",
        sa.Column(
            "conversation_uid",
            sa.String,
            sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("path", sa.String, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("media_type", sa.String, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )
    op.create_table(
        "workspace_ops",
        sa.Column(
            "conversation_uid",
            sa.String,
            sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        # The tool call's idempotency key (`turn_id:tool_call_id`).
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("result", JSONB, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("workspace_ops")
    op.drop_table("workspace_files")
