"""A live stream takes a small batch of chunks from its announcement (NOTIFY's payload)
without reading the stream log; a batch too big to announce, or a gap, is read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests._sse import started
from tests._turn_helpers import pending_turn
from think import ThinkService
from think._settings import Settings
from think.storage import stream_log
from think.streaming import ChunkListener, append
from think.turns import _follow


async def _write(service: ThinkService, turn_id: str, chunks: list[dict[str, Any]]) -> None:
    async with service.store.db.connection() as conn:
        await append(conn, turn_id, chunks)


async def test_a_live_stream_reads_only_what_was_not_announced(
    service: ThinkService, settings: Settings, monkeypatch: pytest.MonkeyPatch, cid: str
) -> None:
    turn = await pending_turn(service, cid)
    turn_id = turn.id
    reads: list[int] = []
    replayed = asyncio.Event()
    real_read = stream_log.read_timed

    async def counted(conn: Any, turn: str, after: int, limit: int = 1000) -> Any:
        reads.append(after)
        rows = await real_read(conn, turn, after, limit)
        replayed.set()
        return rows

    monkeypatch.setattr(_follow, "read_timed", counted)
    big = "x" * (stream_log.ANNOUNCED_BYTES + 100)
    # After the `start` its admission wrote (seq 0), which the replay reads.
    begun = {"type": "start", "messageId": turn.message_id}
    batches: list[list[dict[str, Any]]] = [
        [{"type": "start-step"}, {"type": "text-start", "id": "t1"}],
        [{"type": "text-delta", "id": "t1", "delta": "héllo \n wörld"}],
        [{"type": "text-delta", "id": "t1", "delta": big}],  # announced by the bare turn id
        [{"type": "text-delta", "id": "t1", "delta": "!"}, {"type": "text-end", "id": "t1"}],
        [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}],
    ]
    listener = ChunkListener(settings.libpq_url)
    await listener.start()
    try:
        got: list[tuple[int, dict[str, Any]]] = []

        async def consume() -> None:
            async for item in _follow.follow(service.store, listener, turn_id):
                got.append(item)

        following = asyncio.create_task(consume())
        await asyncio.wait_for(replayed.wait(), timeout=10)  # the replay: `start`
        for batch in batches:
            await _write(service, turn_id, batch)
            await asyncio.sleep(0.05)  # one announcement at a time, as a writer's batches come
        await asyncio.wait_for(following, timeout=10)
    finally:
        await listener.stop()
    assert started(got[0][1]) == begun
    assert [chunk for _, chunk in got[1:]] == [chunk for batch in batches for chunk in batch]
    assert [seq for seq, _ in got] == list(range(len(got)))
    # The replay, and the big batch: the four small ones after it came with their NOTIFY.
    assert reads == [-1, 3]
