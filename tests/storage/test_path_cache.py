"""A worker's cached paths (`think.storage.PathCache`) answer exactly what `Store.path` reads
from Postgres: as the path grows, on another branch, within a budget, and after a message
was changed in place."""

from __future__ import annotations

import secrets

from tests.agents import Forgetful, Helper
from think import ThinkService, UIMessage
from think._settings import Settings
from think.agent._registry import AgentRegistry
from think.engine._worker import build_worker
from think.engine.activities._resources import ActivityResources
from think.engine.activities._turn import TurnActivities
from think.models import close_openai_clients
from think.storage import PathCache, Store, open_database
from think.testing import FakeOpenAIServer, text
from think.workflows import connect

BUDGETS = (None, 10_000, 1300, 1299, 400, 300, 10)


def message(i: int, role: str | None = None) -> UIMessage:
    role = role or ("user" if i % 2 == 0 else "assistant")
    return UIMessage(id=f"m{i}", role=role, parts=[{"type": "text", "text": role[0] * 100}])


async def _uid(service: ThinkService, cid: str) -> str:
    found = await service.store.get_conversation(
        tenant="default", agent=Forgetful.name, conversation_id=cid
    )
    assert found is not None
    return found.uid


async def _revision(service: ThinkService, uid: str) -> int:
    async with service.store.db.connection() as conn:
        cursor = await conn.execute(
            "SELECT messages_revision FROM conversations WHERE uid = %(c)s", {"c": uid}
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row["messages_revision"])


async def _agrees(service: ThinkService, cache: PathCache, uid: str, leaf: str) -> None:
    revision = await _revision(service, uid)
    for budget in BUDGETS:
        async with service.store.db.connection() as conn:
            cached = await cache.path(conn, uid, leaf, revision=revision, byte_budget=budget)
        read = await service.store.path(uid, leaf, byte_budget=budget)
        assert [(m.id, m.parts) for m in cached] == [(m.id, m.parts) for m in read], budget


async def test_cached_paths_read_what_postgres_holds(service: ThinkService, cid: str) -> None:
    conv = service.conversation(Forgetful, cid)
    rules = UIMessage(id="rules", role="system", parts=[{"type": "text", "text": "x" * 500}])
    await conv.add_messages([rules, *(message(i) for i in range(6))])
    uid = await _uid(service, cid)
    cache = PathCache()
    await _agrees(service, cache, uid, "m5")
    assert cache.misses == 1

    # The path grows (the next turn's messages): read from where the cached one ends.
    await conv.add_messages([message(6), message(7)])
    await _agrees(service, cache, uid, "m7")
    assert cache.misses == 1 and cache.hits >= 1

    # A leaf on the cached path (what a regenerate reads), then a branch beside it.
    await _agrees(service, cache, uid, "m3")
    await conv.add_messages([message(20), message(21)], parent_id="m3")
    await _agrees(service, cache, uid, "m21")
    await _agrees(service, cache, uid, "m7")

    # A message changed in place: the revision moves on, and the cached copy is not used.
    changed = UIMessage(id="m2", role="user", parts=[{"type": "text", "text": "changed"}])
    await conv.add_messages([changed], mode="upsert")
    await _agrees(service, cache, uid, "m7")
    async with service.store.db.connection() as conn:
        path = await cache.path(
            conn, uid, "m7", revision=await _revision(service, uid), byte_budget=None
        )
    assert next(m for m in path if m.id == "m2").parts == changed.parts


async def test_the_cache_is_bounded(service: ThinkService, cid: str) -> None:
    conv = service.conversation(Forgetful, cid)
    await conv.add_messages([message(i) for i in range(4)])
    uid = await _uid(service, cid)
    cache = PathCache(max_bytes=200)  # smaller than the path: never kept
    await _agrees(service, cache, uid, "m3")
    await _agrees(service, cache, uid, "m3")
    assert cache.hits == 0


async def test_a_path_over_its_own_bound_is_not_kept(service: ThinkService, cid: str) -> None:
    """A conversation holding a huge message (a large `write`) is read, not kept: a few of
    them would otherwise hold a worker's memory until evicted."""
    conv = service.conversation(Forgetful, cid)
    await conv.add_messages([message(i) for i in range(4)])
    uid = await _uid(service, cid)
    kept, refused = PathCache(max_path_bytes=100_000), PathCache(max_path_bytes=200)
    for cache in (kept, refused):
        await _agrees(service, cache, uid, "m3")
        await _agrees(service, cache, uid, "m3")
    assert kept.hits > 0 and refused.hits == 0


async def _read_nothing(
    service: ThinkService, cache: PathCache, uid: str, leaf: str
) -> list[tuple[str, list[dict[str, object]]]]:
    """The cached path to `leaf`, asked on a closed connection: any statement would raise."""
    async with service.store.db.connection() as conn:
        await conn.close()
        cached = await cache.path(
            conn, uid, leaf, revision=await _revision(service, uid), byte_budget=None
        )
    return [(m.id, m.parts) for m in cached]


async def test_messages_just_stored_extend_the_cached_path(service: ThinkService, cid: str) -> None:
    """What a turn's first step does: the messages it stores are the path's new tail, so the
    read that follows needs no statement; anything the cache cannot vouch for is read."""
    conv = service.conversation(Forgetful, cid)
    await conv.add_messages([message(0)])
    uid = await _uid(service, cid)
    store, cache = service.store, PathCache()
    revision = await _revision(service, uid)

    # At the root of a path nobody cached: the chain is the whole path (m0 is not on it).
    async with store.db.transaction() as conn:
        stored = await store.insert_messages(
            conn, uid, [message(10), message(11)], parent_id=None, turn_id=None
        )
        cache.extend(uid, revision, stored)
    assert [s.parent_id for s in stored] == [None, "m10"]
    assert await _read_nothing(service, cache, uid, "m11") == [
        (m.id, m.parts) for m in await store.path(uid, "m11")
    ]
    await _agrees(service, cache, uid, "m11")

    # Under the cached path's end: the next turn's messages.
    async with store.db.transaction() as conn:
        stored = await store.insert_messages(
            conn, uid, [message(12), message(13)], parent_id="m11", turn_id=None
        )
        cache.extend(uid, revision, stored)
    assert [m[0] for m in await _read_nothing(service, cache, uid, "m13")] == [
        "m10",
        "m11",
        "m12",
        "m13",
    ]
    await _agrees(service, cache, uid, "m13")

    # Anywhere else (a branch under m11): the cache is left as it was, and the step reads.
    async with store.db.transaction() as conn:
        stored = await store.insert_messages(
            conn, uid, [message(14)], parent_id="m11", turn_id=None
        )
        cache.extend(uid, revision, stored)
    misses = cache.misses
    await _agrees(service, cache, uid, "m14")
    assert cache.misses == misses  # found by the walk up from m14, not a whole read

    # Stored, then rolled back: never read, and replaced by what the conversation does hold.
    await _agrees(service, cache, uid, "m13")
    try:
        async with store.db.transaction() as conn:
            stored = await store.insert_messages(
                conn, uid, [message(15)], parent_id="m13", turn_id=None
            )
            cache.extend(uid, revision, stored)
            raise RuntimeError("the transaction fails after the insert")
    except RuntimeError:
        pass
    await conv.add_messages([message(16)], parent_id="m13")
    await _agrees(service, cache, uid, "m16")
    await _agrees(service, cache, uid, "m13")

    # A changed revision: the chain is not trusted.
    async with store.db.transaction() as conn:
        stored = await store.insert_messages(
            conn, uid, [message(17)], parent_id="m16", turn_id=None
        )
        cache.extend(uid, revision - 1, stored)
    await _agrees(service, cache, uid, "m17")


async def test_an_answer_stored_again_with_other_words_is_not_kept(
    service: ThinkService, cid: str
) -> None:
    """A step's answer is the path's new tail inside its transaction; should that fail, a
    retry may store other words under the same id, so the failed one's are forgotten."""
    conv = service.conversation(Forgetful, cid)
    await conv.add_messages([message(0)])
    uid = await _uid(service, cid)
    store, cache = service.store, PathCache()
    revision = await _revision(service, uid)
    await _agrees(service, cache, uid, "m0")
    first = UIMessage(id="a", role="assistant", parts=[{"type": "text", "text": "first words"}])
    try:
        with cache.forgotten_on_error(uid):
            async with store.db.transaction() as conn:
                stored = await store.insert_messages(
                    conn, uid, [first], parent_id="m0", turn_id=None
                )
                cache.extend(uid, revision, stored)
                raise RuntimeError("the commit fails")
    except RuntimeError:
        pass
    retried = UIMessage(id="a", role="assistant", parts=[{"type": "text", "text": "retried"}])
    await conv.add_messages([retried], parent_id="m0")
    await conv.add_messages([message(2)], parent_id="a")
    await _agrees(service, cache, uid, "m2")
    async with store.db.connection() as conn:
        path = await cache.path(conn, uid, "m2", revision=revision, byte_budget=None)
    assert [m.parts for m in path if m.id == "a"] == [retried.parts]


async def test_a_workers_next_turn_reads_no_path(
    settings: Settings, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A turn's committed answer is the worker's cached path's new tail, and the next turn's
    message goes under it: a conversation that stays on one worker sends the model its
    transcript without the worker reading any of it again."""
    local = settings.model_copy(
        update={
            "task_queue": f"paths-{secrets.token_hex(4)}",
            "agents": ["tests.agents:Helper"],
            "openai_base_url": fake_model.base_url,
            "openai_api_key": "test-key",
        }
    )
    client = await connect(local)
    db = await open_database(local, max_size=4)
    store = Store(db)
    registry = AgentRegistry.from_paths(local.agents)
    res = ActivityResources(store, registry, local, temporal=client)
    service = ThinkService(store=store, temporal=client, settings=local, registry=registry)
    try:
        async with build_worker(client, local, TurnActivities(res), service):
            conv = service.conversation(Helper, cid)
            for i in range(3):
                fake_model.script(cid, text(f"answer {i}"))
                assert (await conv.run_turn(f"question {i}")).status == "completed"
        sent = fake_model.requests(cid)[-1]["body"]["messages"]
        assert [m["content"] for m in sent if m["role"] != "system"] == [
            "question 0",
            "answer 0",
            "question 1",
            "answer 1",
            "question 2",
        ]
        assert res.paths.reads == 0
    finally:
        await service.close()  # its stream listener: LISTEN connections are counted elsewhere
        await close_openai_clients()  # the model clients' pooled connections, as a worker's
        await db.close()
