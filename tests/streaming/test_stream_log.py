"""The stream log's fenced append, on real Postgres: a write that sets turn columns refuses a
stale attempt, and, `while_open`, a turn that has ended (a cancel won the race) — saying which,
so a step that skipped its lock still leaves a cancelled turn as the cancel left it. A first
attempt's claim on its way (`Fence.first`) holds every write back until it lands, and one that
lost, or came after the turn ended, writes nothing."""

from __future__ import annotations

import asyncio

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from tests._turn_helpers import chunk_types, pending_turn
from tests._waits import eventually
from think import ThinkService
from think._settings import Settings
from think.storage.stream_log import FirstClaim, read
from think.streaming import (
    ChunkWriter,
    Fence,
    StaleAttempt,
    TurnEnded,
    append,
    claim,
    claim_first,
)
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

    async def written() -> list[str]:  # after the `start` its admission wrote
        async with db.connection() as conn:
            return [chunk["type"] for _, chunk in await read(conn, turn.id, 0)]

    if at_once:
        assert await eventually(written, within=5, every=0.02) == ["start-step", "text-delta"]
    else:
        # Nothing may arrive: watch for a while, far less than the interval, far more than
        # one write takes (the at-once case shows how little that is).
        await asyncio.sleep(0.3)
        assert await written() == []
    rest = [chunk["type"] for chunk in await writer.drain()]
    assert rest == ([] if at_once else ["start-step", "text-delta"])


_PROBE = {"type": "data-probe", "data": 1, "transient": True}


async def test_a_first_claim_that_lands_lets_its_writes_through(
    service: ThinkService, cid: str
) -> None:
    turn = await pending_turn(service, cid)
    fence = Fence.first("step-0", service.store.claim_first(turn.id, "step-0"))
    async with service.store.db.connection() as conn:
        await append(conn, turn.id, [_PROBE], fence)
        # A retry claims after it (attempt 2): the first attempt's writes are refused.
        assert (await claim(conn, turn.id, "step-0")).attempt == 2
        with pytest.raises(StaleAttempt):
            await append(conn, turn.id, [_PROBE], fence)
    assert await chunk_types(service, turn.id) == ["start", "data-probe"]


async def test_a_first_claim_that_another_attempt_beat_writes_nothing(
    service: ThinkService, cid: str
) -> None:
    turn = await pending_turn(service, cid)
    async with service.store.db.connection() as conn:
        other = await claim(conn, turn.id, "step-0")  # attempt 1, taken first
        fence = Fence.first("step-0", service.store.claim_first(turn.id, "step-0"))
        assert fence.attempt == other.attempt == 1  # the same number: only one may write
        with pytest.raises(StaleAttempt):
            await append(conn, turn.id, [_PROBE], fence)
        await append(conn, turn.id, [_PROBE], other)
    assert await chunk_types(service, turn.id) == ["start", "data-probe"]


async def test_a_first_claim_after_the_turn_ended_writes_nothing(
    service: ThinkService, cid: str
) -> None:
    turn = await pending_turn(service, cid)
    async with service.store.db.connection() as conn:
        await conn.execute(
            "UPDATE turns SET status = 'aborted', completed_at = now() WHERE id = %s", (turn.id,)
        )
        assert await claim_first(conn, turn.id, "step-0") == "ended"
        assert await claim_first(conn, "turn_no_such_turn", "step-0") == "ended"
    fence = Fence.first("step-0", service.store.claim_first(turn.id, "step-0"))
    with pytest.raises(TurnEnded):
        await fence.held()
    assert await chunk_types(service, turn.id) == ["start"]


async def test_a_write_in_a_transaction_does_not_wait_for_a_claim_on_its_way(
    service: ThinkService, cid: str
) -> None:
    """The claim updates the turn's row, which the transaction may hold: waiting there could
    wait forever, so the write is refused, and the caller is to await `held()` first."""
    turn = await pending_turn(service, cid)
    release = asyncio.Event()

    async def slow_claim() -> FirstClaim:
        await release.wait()
        return await service.store.claim_first(turn.id, "step-0")

    fence = Fence.first("step-0", slow_claim())
    assert fence.pending
    async with service.store.db.transaction() as conn:
        with pytest.raises(RuntimeError, match="has not landed"):
            await append(conn, turn.id, [_PROBE], fence)
    release.set()
    await fence.held()
    assert not fence.pending
    async with service.store.db.transaction() as conn:
        await append(conn, turn.id, [_PROBE], fence)
    assert await chunk_types(service, turn.id) == ["start", "data-probe"]
