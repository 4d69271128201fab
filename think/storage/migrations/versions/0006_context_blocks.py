"""Context blocks: a conversation's memory blocks and what its frozen system prompt was built
with (`think.storage._context`). `conversations.system_prompt` and `conversations.config`
existed since 0001; this adds the blocks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "context_blocks",
        sa.Column(
            "conversation_uid",
            sa.String,
            sa.ForeignKey("conversations.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("label", sa.String, primary_key=True),
        # What the model wrote to a memory block (NULL: never written, or a provider block).
        sa.Column("content", sa.Text),
        # The fingerprint of the content the frozen system prompt holds (NULL: not frozen yet).
        sa.Column("frozen", sa.String),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
    )


def downgrade() -> None:
    op.drop_table("context_blocks")
