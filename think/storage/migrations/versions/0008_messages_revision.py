"""A conversation's messages revision: bumped when a stored message is changed in place
(`add_messages(mode="upsert")`), so a worker's cached path (`think.storage._path_cache`) knows
it is stale. Messages are otherwise immutable.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.add_column(
        "conversations",
        sa.Column("messages_revision", sa.Integer, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_column("conversations", "messages_revision")
