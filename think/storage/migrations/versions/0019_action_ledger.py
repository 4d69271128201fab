"""The action ledger (`action_ledger`): one row per run of an `@action`, keyed by what the
effect is (tenant, agent, domain key), so that a settled effect is replayed, not run again,
whichever turn or conversation asks.

A key is *live* while a row holds it as `pending` (running under a lease), `parked` (waiting
for a person's decision outside any turn) or `settled` (done: replayed from `result`); a
partial unique index keeps one live row per key, so claiming a key is one `INSERT ... ON
CONFLICT DO NOTHING`. `failed`, `rejected` and `expired` rows release the key and stay as the
audit trail. Not tied to a conversation by a foreign key: deleting a conversation must not let
its effects run again from another one (a tenant's erasure deletes its rows explicitly).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0019"
down_revision = "0018"


def upgrade() -> None:
    op.create_table(
        "action_ledger",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("tenant", sa.String, nullable=False),
        sa.Column("agent", sa.String, nullable=False),
        sa.Column("key", sa.String, nullable=False),
        sa.Column("action", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("input", JSONB, nullable=False),
        sa.Column("input_hash", sa.String, nullable=False),
        sa.Column("conversation_id", sa.String, nullable=False),
        sa.Column("turn_id", sa.String),
        sa.Column("tool_call_id", sa.String),
        sa.Column("requested_by", sa.String),
        sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("approval_id", sa.String),
        sa.Column("approval_kind", sa.String),
        sa.Column("decision", JSONB),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
        sa.Column("approved_by", sa.String),
        sa.Column("approved_at", sa.DateTime(timezone=True)),
        sa.Column("result", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("attachments", JSONB),
        sa.Column("replays", sa.Integer, nullable=False, server_default="0"),
        sa.Column(
            "requested_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("ran_at", sa.DateTime(timezone=True)),
        sa.Column("settled_at", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
    )
    op.create_index(
        "action_ledger_live_key",
        "action_ledger",
        ["tenant", "agent", "key"],
        unique=True,
        postgresql_where=sa.text("status IN ('pending', 'parked', 'settled')"),
    )
    op.create_index(
        "action_ledger_approval",
        "action_ledger",
        ["approval_id"],
        unique=True,
        postgresql_where=sa.text("approval_id IS NOT NULL"),
    )
    op.create_index("action_ledger_audit", "action_ledger", ["tenant", "agent", "requested_at"])
    # The inbox, the sweeper's expiry and its re-signalling read the parked rows only.
    op.create_index(
        "action_ledger_parked",
        "action_ledger",
        ["tenant", "requested_at"],
        postgresql_where=sa.text("status = 'parked'"),
    )


def downgrade() -> None:
    op.drop_table("action_ledger")
