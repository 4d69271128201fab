"""The task queue a turn was admitted for: the workers' sweeper starts only the awaiting turns
of its own queue (and those recorded before this column, which name none), so a turn is never
moved onto the workers of another queue that shares the database.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.add_column("turns", sa.Column("task_queue", sa.String, nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "task_queue")
