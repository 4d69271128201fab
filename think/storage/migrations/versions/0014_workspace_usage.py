"""A usage row per tenant (`workspace_usage`): the bytes and files of all of its workspaces, so
that `THINK_TENANT_WORKSPACE_MAX_BYTES` is checked against one row instead of a sum over every
file of the tenant.

The row is kept by triggers, in the transaction of every change to `workspace_files`, so no
path that writes files (a tool's write, edit or delete, media eviction's copy, a conversation
deleted with its files, or one added later) can leave it out of step:

- statement triggers on `workspace_files` add what an INSERT, UPDATE or DELETE changed, per
  tenant, in one upsert of the tenant's row (a statement that changes no size touches no row);
- a conversation deleted with its files (`ON DELETE CASCADE`) is counted by a trigger on
  `conversations` before the row goes, since the cascade's statement can no longer read the
  conversation's tenant: it locks the files (in the order a file delete locks them, so the two
  do not deadlock) and takes their sizes off; the cascade's own statement then finds no
  conversation and adds nothing.

TRUNCATE is not counted: after one, rebuild the rows with the backfill below.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"

BACKFILL = """
INSERT INTO workspace_usage (tenant, bytes, files)
SELECT k.tenant, sum(w.size), count(*) FROM workspace_files w
JOIN conversations k ON k.uid = w.conversation_uid
GROUP BY k.tenant
ON CONFLICT (tenant) DO UPDATE SET bytes = EXCLUDED.bytes, files = EXCLUDED.files
"""
"""Every tenant's usage summed from its files (what the triggers keep in step afterwards)."""


def upgrade() -> None:
    op.create_table(
        "workspace_usage",
        sa.Column("tenant", sa.String, primary_key=True),
        sa.Column("bytes", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("files", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.execute(
        """
        CREATE FUNCTION think_workspace_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO workspace_usage AS u (tenant, bytes, files)
                SELECT k.tenant, sum(n.size), count(*) FROM new_rows n
                JOIN conversations k ON k.uid = n.conversation_uid
                GROUP BY k.tenant ORDER BY k.tenant
                ON CONFLICT (tenant) DO UPDATE
                SET bytes = u.bytes + EXCLUDED.bytes, files = u.files + EXCLUDED.files;
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO workspace_usage AS u (tenant, bytes, files)
                SELECT k.tenant, -sum(o.size), -count(*) FROM old_rows o
                JOIN conversations k ON k.uid = o.conversation_uid
                GROUP BY k.tenant ORDER BY k.tenant
                ON CONFLICT (tenant) DO UPDATE
                SET bytes = u.bytes + EXCLUDED.bytes, files = u.files + EXCLUDED.files;
            ELSE
                INSERT INTO workspace_usage AS u (tenant, bytes, files)
                SELECT k.tenant, sum(d.size), sum(d.files) FROM (
                    SELECT conversation_uid, size, 1 AS files FROM new_rows
                    UNION ALL
                    SELECT conversation_uid, -size, -1 FROM old_rows
                ) d
                JOIN conversations k ON k.uid = d.conversation_uid
                GROUP BY k.tenant HAVING sum(d.size) <> 0 OR sum(d.files) <> 0
                ORDER BY k.tenant
                ON CONFLICT (tenant) DO UPDATE
                SET bytes = u.bytes + EXCLUDED.bytes, files = u.files + EXCLUDED.files;
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER think_workspace_usage_insert AFTER INSERT ON workspace_files "
        "REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION think_workspace_usage()"
    )
    op.execute(
        "CREATE TRIGGER think_workspace_usage_update AFTER UPDATE ON workspace_files "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION think_workspace_usage()"
    )
    op.execute(
        "CREATE TRIGGER think_workspace_usage_delete AFTER DELETE ON workspace_files "
        "REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION think_workspace_usage()"
    )
    op.execute(
        """
        CREATE FUNCTION think_workspace_usage_conversation() RETURNS trigger LANGUAGE plpgsql
        AS $$
        BEGIN
            INSERT INTO workspace_usage AS u (tenant, bytes, files)
            SELECT OLD.tenant, -sum(f.size), -count(*) FROM (
                SELECT size FROM workspace_files WHERE conversation_uid = OLD.uid FOR UPDATE
            ) f
            HAVING count(*) > 0
            ON CONFLICT (tenant) DO UPDATE
            SET bytes = u.bytes + EXCLUDED.bytes, files = u.files + EXCLUDED.files;
            RETURN OLD;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER think_workspace_usage_conversation BEFORE DELETE ON conversations "
        "FOR EACH ROW EXECUTE FUNCTION think_workspace_usage_conversation()"
    )
    # The triggers above already hold writes to workspace_files off until this commits, so
    # the sum is exact.
    op.execute(BACKFILL)


def downgrade() -> None:
    op.execute("DROP TRIGGER think_workspace_usage_conversation ON conversations")
    op.execute("DROP FUNCTION think_workspace_usage_conversation()")
    for event in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER think_workspace_usage_{event} ON workspace_files")
    op.execute("DROP FUNCTION think_workspace_usage()")
    op.drop_table("workspace_usage")
