"""MCP servers added to one conversation at run time (`Think.add_mcp_server`): the server's
description as `think.tools.McpServer` dumps it, secrets only by environment-variable name."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from think.storage.migrations._columns import conversation_key, timestamp_now

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "conversation_mcp_servers",
        conversation_key(),
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("spec", JSONB, nullable=False),
        timestamp_now("created_at"),
    )


def downgrade() -> None:
    op.drop_table("conversation_mcp_servers")
