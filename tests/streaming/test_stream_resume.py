"""The SSE stream: resume from any point, during and after the turn, on a shared LISTEN."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._sse import chunks, parse, read_stream
from tests._turn_helpers import helper_path
from tests._waits import eventually
from think._settings import Settings
from think.testing import FakeOpenAIServer, reply, text


async def test_resume_from_every_point_after_finish(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("a b c d e f"))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "x", "mode": "wait"})).json()
    _, full = await read_stream(api, turn["stream_url"])
    ids = [e.id for e in full if e.id is not None]
    assert ids == list(range(len(ids)))
    for n in (0, 3, ids[-2], ids[-1]):
        _, tail = await read_stream(api, turn["stream_url"], last_event_id=n)
        assert [e.id for e in tail if e.id is not None] == ids[n + 1 :]
        assert tail[-1].data == "[DONE]"


async def test_resume_mid_stream_gets_exactly_the_rest(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    words = [f"w{i} " for i in range(30)]
    fake_model.script(cid, reply(text(*words), delay=0.03))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "go"})).json()
    seen: list[int] = []
    # Read part of the stream, then drop the connection.
    async with api.stream("GET", turn["stream_url"]) as response:
        buffer = ""
        async for piece in response.aiter_text():
            buffer += piece
            events = [e for e in parse(buffer) if e.id is not None]
            if len(events) >= 6:
                seen = [e.id for e in events if e.id is not None]
                break
    assert seen, "no chunks before the disconnect"
    _, rest = await read_stream(api, turn["stream_url"], last_event_id=seen[-1])
    rest_ids = [e.id for e in rest if e.id is not None]
    assert rest_ids[0] == seen[-1] + 1
    assert rest_ids == list(range(seen[-1] + 1, rest_ids[-1] + 1))
    _, full = await read_stream(api, turn["stream_url"])
    full_chunks = chunks(full)
    assert full_chunks[seen[-1] + 1 :] == chunks(rest)
    streamed = "".join(c["delta"] for c in full_chunks if c["type"] == "text-delta")
    assert streamed == "".join(words)


async def test_stream_of_a_pending_turn_waits_for_it(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    # The second turn queues behind the slow first one; its stream opens before it starts.
    fake_model.script(cid, reply(text("slow answer here"), delay=0.05), text("second"))
    await api.post(f"{helper_path(cid)}/turns", json={"input": "one"})
    second = (await api.post(f"{helper_path(cid)}/turns", json={"input": "two"})).json()
    assert second["status"] == "pending"
    _, events = await read_stream(api, second["stream_url"])
    got = chunks(events)
    assert got[0]["type"] == "start" and got[-1]["type"] == "finish"
    assert "".join(c["delta"] for c in got if c["type"] == "text-delta") == "second"


async def test_many_streams_share_one_listen_connection(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    # Stream listeners only: each worker also listens for cancels, on its own channel.
    listening = sql(
        "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN think_chunks%'"
    )
    async with engine.connect() as conn:
        # The gateway's, and the test process's own ThinkService's when a test opened it.
        before = await conn.scalar(listening)
    fake_model.script(cid, reply(text(*[f"t{i} " for i in range(20)]), delay=0.05))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "fan out"})).json()
    open_streams: list[None] = []
    all_open = asyncio.Event()

    def opened() -> None:
        open_streams.append(None)
        if len(open_streams) == 60:
            all_open.set()

    readers = [
        asyncio.create_task(read_stream(api, turn["stream_url"], opened=opened)) for _ in range(60)
    ]
    await asyncio.wait_for(all_open.wait(), 30)
    async with engine.connect() as conn:
        listeners = await conn.scalar(listening)
        connections = await conn.scalar(
            sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
        )
    results = await asyncio.gather(*readers)
    # One LISTEN per process, not one per stream: 60 streams added none. (How many processes
    # listen before depends on which tests ran first in this session: the gateway's, the test
    # process's ThinkService's, another stack's still shutting down.)
    assert before >= 1 and listeners == before
    assert connections < 60
    first = chunks(results[0][1])
    assert all(chunks(events) == first for _, events in results)


async def test_chunks_are_batched_not_one_insert_per_token(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    fake_model.script(cid, text(*[f"{i} " for i in range(400)]))
    turn = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "many", "mode": "wait"})
    ).json()
    async with engine.connect() as conn:
        rows, transactions = (
            await conn.execute(
                sql(
                    "SELECT count(*), count(DISTINCT created_at) FROM stream_chunks "
                    "WHERE turn_id = :t"
                ),
                {"t": turn["turn_id"]},
            )
        ).one()
    assert rows > 400
    # created_at is the transaction's start time: one value per INSERT batch.
    assert transactions < rows / 10


async def test_an_instant_models_first_words_go_out_before_its_step_ends(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    """A stream's first words are written on their own, even when the model sent the whole
    step in one read. (For a submitter that waits for the whole answer they are batched like
    the rest: tests/streaming/test_stream_log.py.)"""
    # In one write, so the step reads all of it without a pause.
    fake_model.script(cid, reply(text("Hello", " there."), burst=True))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "hi"})).json()
    await read_stream(api, turn["stream_url"])  # to its end: the turn is over
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql(
                    "SELECT chunk->>'type' AS type, xmin::text AS tx FROM stream_chunks "
                    "WHERE turn_id = :t ORDER BY seq"
                ),
                {"t": turn["turn_id"]},
            )
        ).all()
    written_in = {row.type: row.tx for row in reversed(rows)}  # each type's first row
    assert [row.type for row in rows][-1] == "finish"
    # Committed on its own, not with the turn's start or the step's end.
    assert written_in["text-delta"] != rows[-1].tx
    assert written_in["text-delta"] != written_in["start"]


async def test_pruned_chunks_keep_the_turn_and_message(
    api: httpx.AsyncClient, settings: Settings, cid: str
) -> None:
    from think.storage import Store, open_database

    turn = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "keep", "mode": "wait"})
    ).json()
    db = await open_database(settings, max_size=1)
    try:
        # Chunks of turns that ended more than 0 s ago: this one's, once the clock has moved
        # past its end.
        assert await eventually(lambda: Store(db).prune_chunks(0), within=5, every=0.01) > 0
    finally:
        await db.close()
    _, events = await read_stream(api, turn["stream_url"])
    assert [e.data for e in events] == ["[DONE]"]
    again = (await api.get(turn["status_url"])).json()
    assert again["status"] == "completed"
    assert again["message"]["parts"][-1]["text"] == "echo: keep"
    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert messages[-1]["id"] == turn["message_id"]
