"""Context blocks: a conversation's memory blocks and what its frozen system prompt was built
with (`think.storage._frozen_prompt`). `conversations.system_prompt` and `conversations.config`
existed since 0001; this adds the blocks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from think.storage.migrations._columns import conversation_key, timestamp_now

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "context_blocks",
        conversation_key(),
        sa.Column("label", sa.String, primary_key=True),
        # What the model wrote to a memory block (NULL: never written, or a provider block).
        sa.Column("content", sa.Text),
        # The fingerprint of the content the frozen system prompt holds (NULL: not frozen yet).
        sa.Column("frozen", sa.String),
        timestamp_now("updated_at"),
    )


def downgrade() -> None:
    op.drop_table("context_blocks")
