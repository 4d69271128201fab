"""The stream log's fenced append, on real Postgres: a write that sets turn columns refuses a
stale attempt, and, `while_open`, a turn that has ended (a cancel won the race) — saying which,
so a step that skipped its lock still leaves a cancelled turn as the cancel left it."""

from __future__ import annotations

import asyncio

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from tests._turn_helpers import pending_turn
from think import ThinkService
from think._settings import Settings
from think.storage._stream_log import read
from think.streaming import ChunkWriter, Fence, StaleAttempt, TurnEnded, append, claim
from think.testing import FakeOpenAIServer, text


async def test_an_ended_turn_and_a_stale_attempt_are_told_apart(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, settings: Settings, cid: str
) -> None:
    fake_model.script(cid, text("done"))
    r = await api.post(
        f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "hi", "mode": "wait"}
    )
    turn_id = r.json()["turn_id"]
    async with await psycopg.AsyncConnection.connect(
        settings.libpq_url, autocommit=True, row_factory=dict_row
    ) as conn:
        fence = await claim(conn, turn_id, "probe")
        chunk = {"type": "data-probe", "data": 1, "transient": True}
        with pytest.raises(TurnEnded):
            await append(conn, turn_id, [chunk], fence, while_open=True, error="late")
        stale = Fence(key="probe", attempt=fence.attempt - 1)
        with pytest.raises(StaleAttempt):
            await append(conn, turn_id, [chunk], stale, error="late")
        row = await (
            await conn.execute("SELECT error, status FROM turns WHERE id = %s", (turn_id,))
        ).fetchone()
        assert row == {"error": None, "status": "completed"}  # neither write landed
        await append(conn, turn_id, [chunk], fence)  # the current attempt still may


@pytest.mark.parametrize("at_once", [True, False])
async def test_first_words_go_at_once_unless_nobody_waits_for_them(
    service: ThinkService, cid: str, at_once: bool
) -> None:
    """A step's first content goes out at once, without waiting for the batching interval
    (the latency a user feels); for a submitter that waits for the whole answer
    (`first_content_at_once=False`) it is batched like the rest, here never before the end."""
    turn = await pending_turn(service, cid)
    db = service.store.db
    async with db.connection() as conn:
        fence = await claim(conn, turn.id, "step-0")
    writer = ChunkWriter(db, turn.id, fence, interval=30.0, first_content_at_once=at_once)
    writer.emit({"type": "start-step"})
    writer.emit({"type": "text-delta", "id": "t", "delta": "Hello"})
    await writer.let_first_content_out()
    await asyncio.sleep(0.3)  # far less than the interval, far more than one write takes
    async with db.connection() as conn:  # after the `start` its admission wrote
        written = [chunk["type"] for _, chunk in await read(conn, turn.id, 0)]
    rest = [chunk["type"] for chunk in await writer.drain()]
    if at_once:
        assert (written, rest) == (["start-step", "text-delta"], [])
    else:
        assert (written, rest) == ([], ["start-step", "text-delta"])
