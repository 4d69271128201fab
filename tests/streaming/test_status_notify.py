"""A caller waiting for a turn to settle is woken by its status changes, not by every batch
of its chunks: a trigger on `turns` announces `<turn id>/status/<new status>` on the stream
channel, and the listener wakes status waiters on that alone, when the turn has settled."""

from __future__ import annotations

import asyncio

import httpx
import psycopg

from think._settings import Settings
from think.streaming import CHANNEL, ChunkListener
from think.testing import FakeOpenAIServer, text


async def _notifications(url: str, turn_id: str, listening: asyncio.Event, last: str) -> list[str]:
    """The turn's notifications, from when `listening` is set up to the one ending in `last`."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"LISTEN {CHANNEL}")
        listening.set()
        got: list[str] = []
        async for note in conn.notifies(timeout=10):
            if note.payload.startswith(turn_id):
                got.append(note.payload)
                if note.payload.endswith(last):
                    break
        return got


async def test_a_status_change_is_announced_once_and_wakes_only_status_waiters(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, settings: Settings, cid: str
) -> None:
    fake_model.script(cid, text("done"))
    r = await api.post(
        f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "hi", "mode": "wait"}
    )
    assert r.status_code == 200, r.text
    turn_id = r.json()["turn_id"]
    url = settings.libpq_url

    listener = ChunkListener(url)
    await listener.start()
    try:
        with (
            listener.subscribe(turn_id, status_only=True) as status,
            listener.subscribe(turn_id) as chunks,
        ):
            listening = asyncio.Event()
            heard = asyncio.create_task(_notifications(url, turn_id, listening, "/status/error"))
            await asyncio.wait_for(listening.wait(), 5)
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                # New chunks (a bare id), then a write that keeps the status, then a change.
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))
                await asyncio.wait_for(chunks.wait(), 5)
                assert not status.is_set()
                chunks.clear()
                await conn.execute("UPDATE turns SET error = error WHERE id = %s", (turn_id,))
                await conn.execute("UPDATE turns SET status = status WHERE id = %s", (turn_id,))
                # A change to a status nobody waits for is announced, and wakes no one.
                await conn.execute(
                    "UPDATE turns SET status = 'running' WHERE id = %s AND status = 'completed'",
                    (turn_id,),
                )
                # Then new chunks again: the listener hears a channel's notifications in order,
                # so once that one has woken `chunks`, the change before it was handled too.
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))
                await asyncio.wait_for(chunks.wait(), 5)
                chunks.clear()
                assert not status.is_set()
                await conn.execute(
                    "UPDATE turns SET status = 'error' WHERE id = %s AND status = 'running'",
                    (turn_id,),
                )
                await asyncio.wait_for(status.wait(), 5)
            assert await heard == [
                turn_id,
                f"{turn_id}/status/running",
                turn_id,
                f"{turn_id}/status/error",
            ]
            assert not chunks.is_set()
    finally:
        await listener.stop()
