"""Workspace quotas and names (issue 31): a write past a limit is a tool error naming the limit
and its usage, and stores nothing; two concurrent writes cannot both slip past a limit; a large
write is held once, not twice; names with bidi or control characters are refused.

The quota turns run on a worker of their own with small limits (a task queue of its own), on
the suite's Postgres and Temporal; the defaults are checked on the suite's own worker."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests._stack import Stack, own_stack
from tests.agents import Workspaced
from think import ThinkService
from think._settings import DEFAULT_WORKSPACE_MAX_FILE_BYTES, Settings
from think.exceptions import ConfigurationError
from think.storage import (
    Workspace,
    WorkspaceLimits,
    WorkspacePathError,
    WorkspaceQuotaError,
    workspace_path,
)
from think.testing import FakeOpenAIServer, Reply, text, tool_call

QUEUE = "think-quota"
LIMITS = {
    "THINK_WORKSPACE_MAX_FILE_BYTES": "1000",
    "THINK_WORKSPACE_MAX_BYTES": "2000",
    "THINK_WORKSPACE_MAX_FILES": "3",
    "THINK_TENANT_WORKSPACE_MAX_BYTES": "3000",
}


@pytest.fixture(scope="module")
def bounded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A worker (and gateway) of its own, with the small limits of `LIMITS`."""
    env = {**stack.env, "THINK_TASK_QUEUE": QUEUE, **LIMITS}
    with own_stack(env, tmp_path_factory.mktemp("quota")) as own:
        yield own


@pytest.fixture(scope="module")
async def quota_service(bounded: Stack, settings: Settings) -> AsyncIterator[ThinkService]:
    """The turn API for the bounded worker's queue, with the same limits."""
    limited = Settings.from_env({**LIMITS}, find_dev_stack=False)
    update = {
        "agents": ["tests.agents:Workspaced"],
        "task_queue": QUEUE,
        **{
            field: getattr(limited, field)
            for field in (
                "workspace_max_file_bytes",
                "workspace_max_bytes",
                "workspace_max_files",
                "tenant_workspace_max_bytes",
            )
        },
    }
    async with await ThinkService.connect(settings.model_copy(update=update)) as svc:
        yield svc


@pytest.fixture
def tenant() -> str:
    """A tenant of its own: the bounded worker's tenant limit must not count other tests'
    files (the suite's conversations are all `default`'s)."""
    return f"quota-{secrets.token_hex(4)}"


def answers(fake_model: FakeOpenAIServer, cid: str, before: int = 0) -> list[str]:
    """What the model read back after each of its tool calls, from request `before` on."""
    return [
        [m["content"] for m in r["body"]["messages"] if m["role"] == "tool"][-1]
        for r in fake_model.requests(cid)[before + 1 :]
    ]


async def run(
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    cid: str,
    *calls: Reply,
    tenant: str = "default",
) -> list[str]:
    """One turn that makes `calls` (each a tool call), then answers; what each call answered."""
    before = len(fake_model.requests(cid))
    fake_model.script(cid, *calls, text("Done."))
    handle = service.conversation(Workspaced, cid, tenant=tenant)
    assert (await handle.run_turn("Work.")).status == "completed"
    return answers(fake_model, cid, before)


def write(path: str, size: int) -> Reply:
    return tool_call("write", {"path": path, "content": "x" * size})


async def files(service: ThinkService, cid: str, tenant: str = "default") -> dict[str, int]:
    workspace = await service.conversation(Workspaced, cid, tenant=tenant).workspace()
    return {entry.path: entry.size for entry in await workspace.list()}


# -- each limit ---------------------------------------------------------------------------------


async def test_a_file_over_the_per_file_limit_is_refused(
    quota_service: ThinkService, fake_model: FakeOpenAIServer, cid: str, tenant: str
) -> None:
    got = await run(
        quota_service,
        fake_model,
        cid,
        write("big.txt", 1001),
        write("fits.txt", 1000),
        tool_call(
            "edit",
            {"path": "fits.txt", "old_string": "x", "new_string": "xy", "replace_all": True},
        ),
        tenant=tenant,
    )
    assert got[0] == (
        "Error: 'big.txt' would be 1,001 bytes, over THINK_WORKSPACE_MAX_FILE_BYTES "
        "(1,000 bytes a file); nothing was written"
    )
    assert got[1] == "Wrote 1000 bytes to fits.txt."
    # An edit that would grow the file past the limit is refused the same way.
    assert got[2].startswith("Error: 'fits.txt' would be 2,000 bytes, over ")
    assert await files(quota_service, cid, tenant) == {"fits.txt": 1000}


async def test_a_conversation_over_its_bytes_is_refused(
    quota_service: ThinkService, fake_model: FakeOpenAIServer, cid: str, tenant: str
) -> None:
    got = await run(
        quota_service,
        fake_model,
        cid,
        write("a.txt", 900),
        write("b.txt", 900),
        write("c.txt", 300),
        write("a.txt", 100),  # smaller: frees room
        write("c.txt", 300),
        tenant=tenant,
    )
    assert got[:2] == ["Wrote 900 bytes to a.txt.", "Wrote 900 bytes to b.txt."]
    assert got[2] == (
        "Error: writing 300 bytes to 'c.txt' would bring this conversation's workspace to "
        "2,100 bytes, over THINK_WORKSPACE_MAX_BYTES (2,000 bytes; 1,800 in use); nothing was "
        "written: delete files it no longer needs, or write less"
    )
    assert got[3:] == ["Wrote 100 bytes to a.txt.", "Wrote 300 bytes to c.txt."]
    assert await files(quota_service, cid, tenant) == {"a.txt": 100, "b.txt": 900, "c.txt": 300}
    # The Python API is bounded the same way.
    workspace = await quota_service.conversation(Workspaced, cid, tenant=tenant).workspace()
    with pytest.raises(WorkspaceQuotaError, match="THINK_WORKSPACE_MAX_BYTES") as refused:
        await workspace.write("a.txt", b"y" * 1000)
    assert (refused.value.limit, refused.value.maximum, refused.value.usage) == (
        "THINK_WORKSPACE_MAX_BYTES",
        2000,
        1300,
    )
    kept = await workspace.read("a.txt")
    assert kept is not None and kept.data == b"x" * 100


async def test_a_conversation_over_its_file_count_is_refused(
    quota_service: ThinkService, fake_model: FakeOpenAIServer, cid: str, tenant: str
) -> None:
    got = await run(
        quota_service,
        fake_model,
        cid,
        write("1.txt", 1),
        write("2.txt", 1),
        write("3.txt", 1),
        write("4.txt", 1),
        write("3.txt", 2),  # replacing one is no new file
        tenant=tenant,
    )
    assert got[3] == (
        "Error: the workspace already holds 3 files, the most THINK_WORKSPACE_MAX_FILES allows "
        "(3); '4.txt' was not created: delete files it no longer needs, or write to an "
        "existing one"
    )
    assert got[4] == "Wrote 2 bytes to 3.txt."
    assert await files(quota_service, cid, tenant) == {"1.txt": 1, "2.txt": 1, "3.txt": 2}


async def test_a_tenant_over_its_bytes_is_refused(
    quota_service: ThinkService, fake_model: FakeOpenAIServer, cid: str, tenant: str
) -> None:
    first, second = cid, f"{cid}-2"
    assert await run(
        quota_service, fake_model, first, write("a", 900), write("b", 900), tenant=tenant
    ) == ["Wrote 900 bytes to a.", "Wrote 900 bytes to b."]
    got = await run(
        quota_service, fake_model, second, write("a", 900), write("b", 900), tenant=tenant
    )
    assert got[0] == "Wrote 900 bytes to a."
    assert got[1] == (
        "Error: writing 900 bytes to 'b' would bring this tenant's workspace to 3,600 bytes, "
        "over THINK_TENANT_WORKSPACE_MAX_BYTES (3,000 bytes; 2,700 in use); nothing was "
        "written: delete files it no longer needs, or write less"
    )
    assert await files(quota_service, second, tenant) == {"a": 900}
    # Another tenant's conversation is not counted against this one.
    other = f"quota-{secrets.token_hex(4)}"
    assert await run(quota_service, fake_model, f"{cid}-3", write("a", 900), tenant=other) == [
        "Wrote 900 bytes to a."
    ]


# -- concurrency --------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["conversation", "tenant"])
async def test_concurrent_writes_cannot_pass_a_limit_together(
    service: ThinkService, cid: str, scope: str
) -> None:
    """Twelve writes of 400 bytes at once, into a limit of 1,000: two fit, and exactly two are
    stored, whichever connections and conversations they race on."""
    tenant = f"race-{secrets.token_hex(4)}"
    limits = (
        WorkspaceLimits(max_bytes=1000, tenant_max_bytes=0)
        if scope == "conversation"
        else WorkspaceLimits(max_bytes=0, tenant_max_bytes=1000)
    )
    cids = [cid] if scope == "conversation" else [cid, f"{cid}-2", f"{cid}-3"]
    spaces = []
    for conversation in cids:
        found = await service.conversation(Workspaced, conversation, tenant=tenant).workspace()
        spaces.append(Workspace(service.store.db, found.conversation_uid, limits))
    for round_ in range(3):
        writes = [
            spaces[i % len(spaces)].write(f"r{round_}/{i}.txt", b"z" * 400) for i in range(12)
        ]
        results = await asyncio.gather(*writes, return_exceptions=True)
        refused = [r for r in results if isinstance(r, WorkspaceQuotaError)]
        assert [r for r in results if not isinstance(r, WorkspaceQuotaError)] == [400, 400]
        assert len(refused) == 10
        stored = [sum(e.size for e in await space.list()) for space in spaces]
        assert sum(stored) == 800, stored
        for space in spaces:
            await space.delete(f"r{round_}")


@pytest.mark.parametrize("scope", ["tenant", "both"])
async def test_concurrent_writes_and_deletes_keep_the_tenant_usage_exact(
    service: ThinkService, cid: str, scope: str
) -> None:
    """Writes, replacements and deletes of the same paths at once, in three conversations of a
    tenant near its limit: none deadlocks, the limit holds, and the usage row is the files'
    sum afterwards."""
    tenant = f"race-{secrets.token_hex(4)}"
    limits = WorkspaceLimits(
        max_bytes=1500 if scope == "both" else 0, max_files=0, tenant_max_bytes=2000
    )
    spaces = []
    for conversation in (cid, f"{cid}-2", f"{cid}-3"):
        found = await service.conversation(Workspaced, conversation, tenant=tenant).workspace()
        spaces.append(Workspace(service.store.db, found.conversation_uid, limits))

    async def op(i: int) -> None:
        space = spaces[i % 3]
        try:
            if i % 4 == 3:
                await space.delete(f"p{i % 5}")
            else:
                await space.write(f"p{i % 5}", b"q" * (100 + 37 * (i % 7)))
        except WorkspaceQuotaError:
            pass

    for _ in range(3):
        await asyncio.gather(*(op(i) for i in range(40)))
        held, counted = await usage(service, tenant)
        assert held == counted
        assert held[0] <= 2000


async def usage(service: ThinkService, tenant: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The tenant's usage row (bytes, files), and the same summed from its files."""
    async with service.store.db.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT coalesce((SELECT bytes FROM workspace_usage WHERE tenant = %(t)s), 0) "
                "AS b, "
                "coalesce((SELECT files FROM workspace_usage WHERE tenant = %(t)s), 0) AS f, "
                "(SELECT coalesce(sum(w.size), 0) FROM workspace_files w "
                " JOIN conversations k ON k.uid = w.conversation_uid WHERE k.tenant = %(t)s) "
                "AS sb, "
                "(SELECT count(*) FROM workspace_files w "
                " JOIN conversations k ON k.uid = w.conversation_uid WHERE k.tenant = %(t)s) "
                "AS sf",
                {"t": tenant},
            )
        ).fetchone()
    assert row is not None
    return (int(row["b"]), int(row["f"])), (int(row["sb"]), int(row["sf"]))


async def test_the_tenant_usage_follows_every_change_and_deletes_give_bytes_back(
    service: ThinkService, cid: str
) -> None:
    """Every way files change (write, replace, a write not bounded by limits, delete of a file
    and of a directory, a conversation deleted with its files) moves the tenant's usage row by
    exactly what changed; what a delete gives back can be written again."""
    tenant = f"usage-{secrets.token_hex(4)}"
    limits = WorkspaceLimits(max_bytes=0, max_files=0, tenant_max_bytes=1000)
    uids = [
        (await service.conversation(Workspaced, c, tenant=tenant).workspace()).conversation_uid
        for c in (cid, f"{cid}-2")
    ]
    first, second = (Workspace(service.store.db, uid, limits) for uid in uids)

    async def expect(total: tuple[int, int]) -> None:
        held, counted = await usage(service, tenant)
        assert held == counted == total

    await first.write("a.txt", b"a" * 400)
    await first.write("dir/b.txt", b"b" * 200)
    await first.write("dir/c.txt", b"c" * 100)
    await expect((700, 3))
    await first.write("a.txt", b"a" * 300)  # replaced, smaller
    await expect((600, 3))
    assert await second.write_if_absent("img.png", b"i" * 50, "image/png")
    assert not await second.write_if_absent("img.png", b"i" * 50, "image/png")
    await expect((650, 3 + 1))
    with pytest.raises(WorkspaceQuotaError) as refused:
        await second.write("big.txt", b"z" * 400)
    assert refused.value.limit == "THINK_TENANT_WORKSPACE_MAX_BYTES"
    assert refused.value.usage == 650
    await expect((650, 4))  # nothing of the refused write is counted
    assert await first.delete("dir") == 2
    await expect((350, 2))
    await second.write("big.txt", b"z" * 400)  # fits now the directory is gone
    await expect((750, 3))
    async with service.store.db.transaction() as conn:
        await conn.execute(
            "DELETE FROM conversations WHERE uid = %(c)s", {"c": second.conversation_uid}
        )
    await expect((300, 1))
    await first.write("after.txt", b"y" * 700)  # the deleted conversation's bytes are back
    await expect((1000, 2))


# -- defaults, and a large write held once ------------------------------------------------------


async def test_the_default_file_limit_refuses_a_14_mib_write_and_a_large_write_is_held_once(
    service: ThinkService, fake_model: FakeOpenAIServer, api: httpx.AsyncClient, cid: str
) -> None:
    """By default a 14 MiB file is refused; a 4 MiB one is written. Each call's content is in
    the stored message once (its input), never again in its output, and the stream carries it
    once too: its `tool-input-available` chunk, not also every delta before it."""
    big, fits = 14 * 1024 * 1024, 4 * 1024 * 1024
    assert big > DEFAULT_WORKSPACE_MAX_FILE_BYTES
    fake_model.script(
        cid,
        tool_call("write", {"path": "big.txt", "content": "b" * big}, fragments=200),
        tool_call("write", {"path": "fits.txt", "content": "f" * fits}, fragments=200),
        text("Done."),
    )
    result = await service.conversation(Workspaced, cid).run_turn("Write both.")
    assert result.status == "completed"
    got = answers(fake_model, cid)
    assert got[0].startswith("Error: 'big.txt' would be 14,680,064 bytes, over ")
    assert "THINK_WORKSPACE_MAX_FILE_BYTES (10,485,760 bytes a file)" in got[0]
    assert got[1] == f"Wrote {fits} bytes to fits.txt."
    assert await files(service, cid) == {"fits.txt": fits}

    listed = await api.get(f"/v1/agents/workspaced/conversations/{cid}/messages")
    content = big + fits
    assert len(listed.content) < content * 1.01
    parts = [p for m in listed.json()["messages"] for p in m["parts"]]
    tools = [p for p in parts if p["type"] == "tool-write"]
    assert [len(p["input"]["content"]) for p in tools] == [big, fits]
    assert all(len(json.dumps(p.get("output", p.get("errorText")))) < 300 for p in tools)

    stream = await api.get(
        f"/v1/agents/workspaced/conversations/{cid}/turns/{result.turn_id}/stream"
    )
    assert stream.status_code == 200
    assert len(stream.content) < content * 1.01, len(stream.content) / content


# -- names --------------------------------------------------------------------------------------

SPOOFING = [
    "invoice\u202etxt.exe",
    "a\u202ab",
    "a\u202db",
    "a\u2066b",
    "a\u2069b",
    "a\u200eb",
    "a\u200fb",
    "a\u061cb",
    "a\u2028b",
    "a\x85b",
    "a\x9bb",
    "a\x7fb",
    "a\x1bb",
]


@pytest.mark.parametrize("name", SPOOFING)
def test_bidi_and_control_characters_are_refused_in_names(name: str) -> None:
    with pytest.raises(WorkspacePathError):
        workspace_path(f"notes/{name}")


async def test_spoofing_names_are_refused_by_the_tools_and_over_http(
    service: ThinkService, fake_model: FakeOpenAIServer, api: httpx.AsyncClient, cid: str
) -> None:
    got = await run(
        service,
        fake_model,
        cid,
        tool_call("write", {"path": "invoice\u202etxt.exe", "content": "x"}),
        tool_call("write", {"path": "a\x85b.md", "content": "x"}),
        tool_call("write", {"path": "plain name.md", "content": "x"}),
    )
    assert got[0].startswith("Error: workspace path ")
    assert "bidirectional control" in got[0] and "U+202E" in got[0]
    assert got[1].startswith("Error: ") and "control character" in got[1]
    assert got[2] == "Wrote 1 bytes to plain name.md."
    assert await files(service, cid) == {"plain name.md": 1}

    base = f"/v1/agents/workspaced/conversations/{cid}/workspace"
    for params, url, field in (
        ({"prefix": "notes\u202e"}, base, "prefix"),
        ({"prefix": "a\x85"}, base, "prefix"),
        ({}, f"{base}/a%E2%80%AEb.md", "path"),
        ({}, f"{base}/a%C2%9Bb.md", "path"),
    ):
        answer = await api.get(url, params=params)
        assert answer.status_code == 422, (url, params, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["errors"][0]["field"] == field


# -- settings -----------------------------------------------------------------------------------


def test_the_limits_are_read_from_their_variables() -> None:
    read = Settings.from_env(LIMITS, find_dev_stack=False)
    assert WorkspaceLimits.from_settings(read) == WorkspaceLimits(
        max_file_bytes=1000, max_bytes=2000, max_files=3, tenant_max_bytes=3000
    )
    assert WorkspaceLimits.from_settings(Settings()) == WorkspaceLimits()
    assert Settings().tenant_workspace_max_bytes == 10 * 1024**3  # on: one row to read
    off = Settings.from_env({"THINK_WORKSPACE_MAX_FILES": "0"}, find_dev_stack=False)
    assert off.workspace_max_files == 0
    for name in LIMITS:
        with pytest.raises(ConfigurationError, match=name):
            Settings.from_env({name: "10MB"}, find_dev_stack=False)
