"""A database written by an older release, brought to the newest schema: what it held stays
reachable through the store.

The database is made at migration 0013 (the last before submission ids were scoped to their
tenant), filled as that release's admission filled it (a turn whose row id is the client's
`submission_id` as given, its messages and stream), migrated with `think migrate`'s own
function, and read back. A later migration adds its own rows at 0013 or after, and its own
reads at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from psycopg.types.json import Jsonb
from sqlalchemy import create_engine

from think._messages import UIMessage
from think._settings import Settings
from think.storage import (
    MIGRATIONS,
    Database,
    Store,
    SubmissionConflict,
    TurnRequest,
    Workspace,
    WorkspaceLimits,
    WorkspaceQuotaError,
    migrate,
)

TENANT, OTHER = "acme", "globex"
SID = "order-42"
"""A client's submission id, stored unscoped, as migration 0013's code stored it."""


@pytest.fixture(scope="module")
def old_database(settings: Settings) -> Iterator[Settings]:
    """A database of its own on the suite's Postgres, at migration 0013."""
    name = f"upgrade_{secrets.token_hex(4)}"
    admin = settings.libpq_url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(settings.libpq_url)._replace(path=f"/{name}"))
    old = settings.model_copy(update={"database_url": url})
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(old.sqlalchemy_url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "0013")
    finally:
        engine.dispose()
    try:
        yield old
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fill_as_0013_did(settings: Settings) -> None:
    """One conversation of tenant `acme` with a completed turn named `SID` by its client."""
    with psycopg.connect(settings.libpq_url) as conn:
        conn.execute(
            "INSERT INTO conversations (uid, tenant, agent, id, active_leaf_id) "
            "VALUES ('conv-1', %s, 'helper', 'c1', 'msg-a')",
            (TENANT,),
        )
        question = [{"type": "text", "text": "where is my order?"}]
        request = {"messages": [{"id": "msg-q", "role": "user", "parts": question}]}
        conn.execute(
            "INSERT INTO turns (id, conversation_uid, agent, idempotency_key, request_hash, "
            "request, status, message_id, parent_id, message, completed_at, task_queue) "
            "VALUES (%s, 'conv-1', 'helper', 'key-1', 'hash-1', %s, 'completed', 'msg-a', "
            "'msg-q', %s, now(), 'think')",
            (SID, Jsonb(request), Jsonb({"id": "msg-a", "role": "assistant", "parts": []})),
        )
        for message, parent, role in (("msg-q", None, "user"), ("msg-a", "msg-q", "assistant")):
            conn.execute(
                "INSERT INTO messages (conversation_uid, id, parent_id, role, parts, turn_id) "
                "VALUES ('conv-1', %s, %s, %s, '[]', %s)",
                (message, parent, role, SID),
            )
        # Workspace files in both tenants, for 0014's usage rows to be summed from.
        conn.execute(
            "INSERT INTO conversations (uid, tenant, agent, id) "
            "VALUES ('conv-files', %s, 'helper', 'files')",
            (OTHER,),
        )
        for uid, path, size in (
            ("conv-1", "a.txt", 10),
            ("conv-1", "d/b.txt", 20),
            ("conv-files", "c.txt", 5),
        ):
            conn.execute(
                "INSERT INTO workspace_files (conversation_uid, path, data, media_type, size) "
                "VALUES (%s, %s, %s, 'text/plain', %s)",
                (uid, path, b"x" * size, size),
            )
        for seq, chunk in enumerate(({"type": "start", "messageId": "msg-a"}, {"type": "finish"})):
            conn.execute(
                "INSERT INTO stream_chunks (turn_id, seq, attempt, chunk) VALUES (%s, %s, 0, %s)",
                (SID, seq, Jsonb(chunk)),
            )


@pytest.fixture(scope="module")
async def upgraded(old_database: Settings) -> AsyncIterator[Store]:
    _fill_as_0013_did(old_database)
    await migrate(old_database)
    db = await Database(old_database.libpq_url, min_size=1, max_size=2).open()
    try:
        yield Store(db)
    finally:
        await db.close()


def _request(text: str) -> TurnRequest:
    return TurnRequest(messages=[UIMessage(role="user", parts=[{"type": "text", "text": text}])])


async def test_a_turn_named_before_the_upgrade_is_found_by_its_name(upgraded: Store) -> None:
    conversation = await upgraded.get_conversation(
        tenant=TENANT, agent="helper", conversation_id="c1"
    )
    assert conversation is not None
    turn = await upgraded.find_turn(conversation, SID)
    assert turn is not None and turn.id == SID and turn.status == "completed"
    assert await upgraded.get_turn(SID) == turn
    [found] = await upgraded.list_turns(conversation.uid)
    assert found.id == SID
    # The same key and name again: the existing record, not a second turn.
    repeat = await upgraded.admit_turn(
        tenant=TENANT,
        agent="helper",
        conversation_id="c1",
        request=_request("ignored"),
        request_hash="hash-1",
        idempotency_key="key-1",
        submission_id=SID,
    )
    assert repeat.accepted is False and repeat.turn.id == SID


async def test_a_name_taken_before_the_upgrade_stays_taken_in_its_tenant_only(
    upgraded: Store,
) -> None:
    with pytest.raises(SubmissionConflict, match="another conversation") as taken:
        await upgraded.admit_turn(
            tenant=TENANT,
            agent="helper",
            conversation_id="c2",
            request=_request("again"),
            request_hash="hash-2",
            idempotency_key=None,
            submission_id=SID,
        )
    assert taken.value.turn_id == SID
    theirs = await upgraded.admit_turn(
        tenant=OTHER,
        agent="helper",
        conversation_id="c1",
        request=_request("theirs"),
        request_hash="hash-3",
        idempotency_key=None,
        submission_id=SID,
    )
    assert theirs.accepted is True and theirs.turn.id != SID
    other = await upgraded.get_conversation(tenant=OTHER, agent="helper", conversation_id="c1")
    assert other is not None
    found = await upgraded.find_turn(other, SID)
    assert found is not None and found.id == theirs.turn.id


async def test_the_workspace_usage_is_summed_from_the_files_already_there(upgraded: Store) -> None:
    """0014 backfills a usage row per tenant from the files written before it, and the tenant
    limit then counts them."""

    async def rows() -> dict[str, tuple[int, int]]:
        async with upgraded.db.connection() as conn:
            found = await (
                await conn.execute("SELECT tenant, bytes, files FROM workspace_usage")
            ).fetchall()
        return {r["tenant"]: (r["bytes"], r["files"]) for r in found}

    assert await rows() == {TENANT: (30, 2), OTHER: (5, 1)}
    workspace = Workspace(upgraded.db, "conv-1", WorkspaceLimits(tenant_max_bytes=40))
    await workspace.write("e.txt", b"y" * 10)
    with pytest.raises(WorkspaceQuotaError) as refused:
        await workspace.write("f.txt", b"y")
    assert refused.value.usage == 40
    assert await workspace.delete("d") == 1
    assert (await rows())[TENANT] == (20, 2)
