"""Real failures for the tests of the one rule for failure (issue 31): a Postgres trigger,
created by a test and dropped after, that refuses only that test's own writes, and what every
such test checks of a turn that failed (the safe message, its bounded attempts, the
conversation's next turn)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, WorkflowFailureError

from tests._sse import chunks, read_stream
from tests._turn_helpers import activity_attempts
from think.workflows.names import turn_workflow_id

SAFE = "because of an internal error"
REFUSAL = "refused by the test"
"""The trigger's exception text: what no client may ever read."""
ENDS_WITHIN = 30.0
"""Seconds a failed turn (or activity) may take to end: the code before the rule never ends
it, so a test fails here instead of hanging."""


@asynccontextmanager
async def refused(
    engine: AsyncEngine,
    table: str,
    condition: str,
    *,
    errcode: str = "22P05",
    event: Literal["INSERT", "UPDATE"] | None = None,
) -> AsyncIterator[None]:
    """Postgres refuses, with SQLSTATE `errcode`, every write (`event`: by default an INSERT
    of `stream_chunks`, an UPDATE of any other table) of `table` whose new row meets
    `condition` (a trigger's `WHEN`, which may use `OLD` for an UPDATE), until the block
    ends."""
    name = f"refuse_{uuid.uuid4().hex[:12]}"
    event = event or ("INSERT" if table == "stream_chunks" else "UPDATE")
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"RAISE EXCEPTION '{REFUSAL}' USING ERRCODE = '{errcode}'; END $$"
        )
        await conn.exec_driver_sql(
            f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW "
            f"WHEN ({condition}) EXECUTE FUNCTION {name}()"
        )
    try:
        yield
    finally:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
            await conn.exec_driver_sql(f"DROP FUNCTION {name}()")


def url(agent: str, cid: str) -> str:
    return f"/v1/agents/{agent}/conversations/{cid}/turns"


async def ends_in_error(
    api: httpx.AsyncClient, agent: str, cid: str, body: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit a turn that must end `error` within `ENDS_WITHIN` s, with the safe message in
    its stream and record; returns the record and the stream's chunks."""
    response = await api.post(url(agent, cid), json={"input": "hello", **(body or {})})
    assert response.status_code == 202, response.text
    submitted = response.json()
    _, events = await asyncio.wait_for(
        read_stream(api, submitted["stream_url"]), timeout=ENDS_WITHIN
    )
    streamed = chunks(events)
    assert streamed[-1]["type"] == "error", streamed
    assert SAFE in streamed[-1]["errorText"]
    turn: dict[str, Any] = (await api.get(submitted["status_url"])).json()
    assert turn["status"] == "error", turn
    assert SAFE in turn["error"] and turn["turn_id"] in turn["error"]
    assert REFUSAL not in json.dumps(turn) + json.dumps(streamed)
    return turn, streamed


async def next_turn_completes(api: httpx.AsyncClient, agent: str, cid: str) -> dict[str, Any]:
    """The conversation goes on: its next turn runs and completes (the fake model echoes)."""
    response = await api.post(
        url(agent, cid), json={"input": "still there?", "mode": "wait", "wait_timeout": 30}
    )
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"][-1]["text"] == "echo: still there?"
    return turn


async def workflow_attempts(temporal: Client, workflow_id: str, kind: str) -> list[int]:
    """The attempts of the workflow's `kind` activities, once it has ended (within
    `ENDS_WITHIN` s, failed or not)."""
    handle = temporal.get_workflow_handle(workflow_id)
    with contextlib.suppress(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), timeout=ENDS_WITHIN)
    return activity_attempts((await handle.fetch_history()).events, kind)


async def attempts(temporal: Client, agent: str, cid: str, turn_id: str, kind: str) -> list[int]:
    """The attempts of the turn's `kind` activities, once its workflow has ended."""
    return await workflow_attempts(temporal, turn_workflow_id(agent, cid, turn_id), kind)
