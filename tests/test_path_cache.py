"""A worker's cached paths (`think.storage.PathCache`) answer exactly what `Store.path` reads
from Postgres: as the path grows, on another branch, within a budget, and after a message
was changed in place."""

from __future__ import annotations

from tests.agents import Forgetful
from think import ThinkService, UIMessage
from think.storage import PathCache

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
