"""Search reads one conversation's index entries: GIN (conversation_uid, search) and a btree
on (conversation_uid, position), for `think.storage._search`.

The single-column GIN index over `search` made a search in one conversation intersect the
matches of every conversation with a bitmap of the conversation's rows: 2 s for a common word
at a million messages (docs/benchmarks.md). `btree_gin` lets the GIN index hold the
conversation as well; it is a contrib extension that Postgres marks trusted (13+), so the
database owner can create it without superuser rights.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.drop_index("messages_search_idx", table_name="messages")
    op.create_index(
        "messages_search_idx",
        "messages",
        ["conversation_uid", "search"],
        postgresql_using="gin",
    )
    op.create_index("messages_position_idx", "messages", ["conversation_uid", "position"])


def downgrade() -> None:
    op.drop_index("messages_position_idx", table_name="messages")
    op.drop_index("messages_search_idx", table_name="messages")
    op.create_index("messages_search_idx", "messages", ["search"], postgresql_using="gin")
    # btree_gin stays: other objects may use it by now.
