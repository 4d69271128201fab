"""MCP servers added to one conversation at run time (`Think.add_mcp_server`): the server's
description as `think.tools.McpServer` dumps it, secrets only by environment-variable name."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "conversation_mcp_servers",
        sa.Column(
            "conversation_uid",
            sa.String,
            sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("spec", JSONB, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("conversation_mcp_servers")
