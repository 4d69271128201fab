"""The built-in tools end to end: the scripted model calls them through a real worker, on real
Postgres and Temporal; what the model reads back is asserted from the requests it received."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._fetch_fixtures import local_server
from tests._logs import emitted
from tests._stack import Stack
from tests.agents import Fetcher, Skilled, Workspaced
from think import ThinkService, UIMessage
from think._current import BOUND, _Binding
from think.client import AsyncThinkClient, NotFoundError
from think.storage import Workspace
from think.storage._tables import WorkspaceFileRow, WorkspaceOpRow, WorkspaceUsageRow
from think.testing import FakeOpenAIServer, text, tool_call
from think.tools import ToolContext
from think.tools._workspace import edit

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def last_result(fake_model: FakeOpenAIServer, cid: str, n: int) -> str:
    """What the model read back after its n-th step's tool call (0-based)."""
    return tool_results(fake_model.requests(cid)[n + 1])[-1]


async def _uid(service: ThinkService, agent: str, cid: str, tenant: str = "default") -> str:
    conv = await service.store.get_conversation(tenant=tenant, agent=agent, conversation_id=cid)
    assert conv is not None
    return conv.uid


# -- workspace ------------------------------------------------------------------------------------


async def test_the_workspace_tools_end_to_end(
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    api: httpx.AsyncClient,
    stack: Stack,
    cid: str,
) -> None:
    fake_model.script(
        cid,
        tool_call("write", {"path": "notes/todo.md", "content": "buy milk\ncall Ann\n"}),
        tool_call("edit", {"path": "notes/todo.md", "old_string": "milk", "new_string": "tea"}),
        tool_call("read", {"path": "/workspace/notes/todo.md"}),
        tool_call("write", {"path": "src/app.py", "content": "print('tea time')\n"}),
        tool_call("ls", {}),
        tool_call("find", {"pattern": "**/*.md"}),
        tool_call("grep", {"pattern": "tea"}),
        tool_call("read", {"path": "../../etc/passwd"}),
        tool_call("read", {"path": "/etc/passwd"}),
        tool_call("delete", {"path": "src"}),
        tool_call("ls", {"path": "src"}),
        text("Done."),
    )
    result = await service.conversation(Workspaced, cid).run_turn("Keep my notes.")
    assert result.status == "completed"
    names = [t["function"]["name"] for t in fake_model.requests(cid)[0]["body"]["tools"]]
    assert names == ["read", "ls", "find", "grep", "write", "edit", "delete"]
    read = [last_result(fake_model, cid, i) for i in range(11)]
    assert read[0] == "Wrote 18 bytes to notes/todo.md."  # buy milk\ncall Ann\n
    assert read[1] == "Replaced 1 occurrence in notes/todo.md."
    assert read[2] == "1\tbuy tea\n2\tcall Ann"
    assert read[4] == "notes/  (1 files)\nsrc/  (1 files)"
    assert json.loads(read[5]) == ["notes/todo.md"]
    assert read[6] == "notes/todo.md:1: buy tea\nsrc/app.py:1: print('tea time')"
    assert read[7].startswith("Error: ") and "outside the workspace" in read[7]
    assert read[8].startswith("Error: ") and "absolute" in read[8]
    assert read[9] == "Deleted 1 file (src)."
    assert read[10] == "No directory 'src'."

    # A person reads the same files over HTTP.
    base = f"/v1/agents/workspaced/conversations/{cid}/workspace"
    listing = (await api.get(base)).json()
    assert [f["path"] for f in listing["files"]] == ["notes/todo.md"]
    assert listing["files"][0]["size"] == len(b"buy tea\ncall Ann\n")
    file = await api.get(f"{base}/notes/todo.md")
    assert file.status_code == 200 and file.text == "buy tea\ncall Ann\n"
    assert file.headers["content-type"].startswith("text/markdown")
    assert file.headers["content-security-policy"] == "sandbox"
    directory = await api.get(f"{base}/notes")
    assert [f["path"] for f in directory.json()["files"]] == ["notes/todo.md"]
    missing = await api.get(f"{base}/notes/nope.md")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith(
        "application/problem+json"
    )
    escape = await api.get(f"{base}/notes/%2e%2e/%2e%2e/secret")
    assert escape.status_code == 422
    assert escape.json()["errors"][0]["field"] == "path"
    bad_prefix = await api.get(base, params={"prefix": "../x"})
    assert bad_prefix.status_code == 422 and bad_prefix.json()["errors"][0]["field"] == "prefix"

    # And through the Python client.
    async with AsyncThinkClient(stack.api_url) as client:
        files = await client.workspace_files("workspaced", cid, prefix="notes")
        assert [(f.path, f.media_type) for f in files] == [("notes/todo.md", "text/markdown")]
        content = await client.read_workspace_file("workspaced", cid, "/workspace/notes/todo.md")
        assert content == b"buy tea\ncall Ann\n"
        with pytest.raises(NotFoundError):
            await client.read_workspace_file("workspaced", cid, "notes/nope.md")


async def test_one_conversation_never_sees_anothers_files(
    service: ThinkService, fake_model: FakeOpenAIServer, api: httpx.AsyncClient, cid: str
) -> None:
    fake_model.script(cid, tool_call("write", {"path": "secret.txt", "content": "42"}), text("ok"))
    assert (await service.conversation(Workspaced, cid).run_turn("Save it.")).status == "completed"
    other, tenant_cid = f"{cid}-other", cid
    for conversation, tenant in ((other, "default"), (tenant_cid, "tenant-b")):
        script_id = conversation if tenant == "default" else cid
        fake_model.script(
            script_id, tool_call("read", {"path": "secret.txt"}), tool_call("ls", {}), text("no")
        )
        handle = service.conversation(Workspaced, conversation, tenant=tenant)
        before = len(fake_model.requests(script_id))
        assert (await handle.run_turn("Read it.")).status == "completed"
        answers = [tool_results(r)[-1] for r in fake_model.requests(script_id)[before + 1 :]]
        assert answers[0] == (
            "Error: there is no file 'secret.txt' in the workspace; `ls` or `find` lists them"
        )
        assert answers[1] == "The workspace is empty."
    # From Python: the conversation's own workspace has the file, the others do not.
    mine = await service.conversation(Workspaced, cid).workspace()
    kept = await mine.read("secret.txt")
    assert kept is not None and kept.text() == "42"
    for conversation, tenant in ((other, "default"), (cid, "tenant-b")):
        theirs = await service.conversation(Workspaced, conversation, tenant=tenant).workspace()
        assert await theirs.list() == [] and await theirs.read("secret.txt") is None
    # Over HTTP too: the other conversation's listing is empty, its file a 404.
    listing = await api.get(f"/v1/agents/workspaced/conversations/{other}/workspace")
    assert listing.json() == {"files": []}
    gone = await api.get(f"/v1/agents/workspaced/conversations/{other}/workspace/secret.txt")
    assert gone.status_code == 404
    unknown = await api.get("/v1/agents/workspaced/conversations/c-nobody/workspace")
    assert unknown.status_code == 404


async def test_a_retried_write_is_not_applied_twice(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The attempt after a crash (same idempotency key) answers what the first one did; the
    replacement is made once, and a new call (a new key) sees the file as it is."""
    fake_model.script(cid, tool_call("write", {"path": "a.txt", "content": "one two"}), text("k"))
    done = await service.conversation(Workspaced, cid).run_turn("Write.")
    assert done.status == "completed"
    ctx = ToolContext(
        agent="workspaced",
        conversation_id=cid,
        turn_id=done.turn_id,
        tool_call_id="call_retried",
        tool_name="edit",
    )
    token = BOUND.set(_Binding(service, done.turn_id))
    try:
        arguments = {"path": "a.txt", "old_string": "one", "new_string": "one one"}
        first = await edit(ctx, **arguments)
        again = await edit(ctx, **arguments)
        assert first == again == "Replaced 1 occurrence in a.txt."
        workspace = Workspace(service.store.db, await _uid(service, "workspaced", cid))
        stored = await workspace.read("a.txt")
        assert stored is not None and stored.text() == "one one two"
        fresh = ctx.model_copy(update={"tool_call_id": "call_new"})
        with pytest.raises(Exception, match="occurs 2 times"):
            await edit(fresh, **arguments)
    finally:
        BOUND.reset(token)


# -- media eviction -------------------------------------------------------------------------------


async def test_aged_images_leave_the_context_and_read_brings_them_back(
    service: ThinkService, fake_model: FakeOpenAIServer, api: httpx.AsyncClient, cid: str
) -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    conversation = service.conversation(Workspaced, cid)
    await conversation.add_messages(
        [
            UIMessage(
                id="shot",
                role="user",
                parts=[
                    {"type": "text", "text": "Look:"},
                    {"type": "file", "mediaType": "image/png", "url": url},
                ],
            ),
            UIMessage(id="a1", role="assistant", parts=[{"type": "text", "text": "A cat."}]),
            UIMessage.user_text("And now?", id="u2"),
            UIMessage(id="a2", role="assistant", parts=[{"type": "text", "text": "Still."}]),
        ]
    )
    path = "/workspace/attachments/evicted/shot-1.png"
    fake_model.script(cid, tool_call("read", {"path": path}), text("It is a cat."))
    assert (await conversation.run_turn("What was the picture?")).status == "completed"
    first, second = (r["body"]["messages"] for r in fake_model.requests(cid)[-2:])
    # 5 messages, 4 kept whole: the picture's message is the one past the cut-off.
    shot = next(m for m in first if m["role"] == "user")
    assert shot["content"] == f"Look:\n[evicted image/png, {len(PNG)} bytes; preserved at {path}]"
    assert "image_url" not in json.dumps(first)
    # `read` of the marker's path gives the model the picture again.
    attached = second[-1]
    assert attached["role"] == "user"
    assert attached["content"] == [{"type": "image_url", "image_url": {"url": url}}]
    # The bytes are in the workspace, raw, with their type...
    kept = await api.get(f"/v1/agents/workspaced/conversations/{cid}/workspace{path[10:]}")
    assert kept.content == PNG and kept.headers["content-type"] == "image/png"
    # ...and the stored message is as it was.
    stored = next(m for m in await conversation.messages() if m.id == "shot")
    assert stored.parts[1] == {"type": "file", "mediaType": "image/png", "url": url}


# -- skills ---------------------------------------------------------------------------------------


def _system(request: dict[str, Any]) -> str:
    return str(request["body"]["messages"][0]["content"])


async def test_skills_from_a_directory_and_from_the_workspace(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    skill = (
        "---\nname: haiku\ndescription: Answer in a haiku: three lines, 5-7-5.\n---\n"
        "Count the syllables.\n"
    )
    fake_model.script(
        cid,
        tool_call("activate_skill", {"name": "release-notes"}),
        tool_call("read_skill_resource", {"path": "release-notes/references/style.md"}),
        tool_call("activate_skill", {"name": "hidden"}),
        tool_call("write", {"path": ".agents/skills/haiku/SKILL.md", "content": skill}),
        text("Noted."),
    )
    conversation = service.conversation(Skilled, cid)
    assert (await conversation.run_turn("Write release notes.")).status == "completed"
    requests = fake_model.requests(cid)
    system = _system(requests[0])
    assert "- release-notes: Write release notes from a list of merged changes." in system
    assert "- Odd_Name: A skill whose name breaks" in system  # warnings, still loaded
    assert "no-description" not in system and "hidden" not in system
    assert "haiku" not in system
    names = [t["function"]["name"] for t in requests[0]["body"]["tools"]]
    assert {"activate_skill", "read_skill_resource"} <= set(names)
    activated = json.loads(last_result(fake_model, cid, 0))
    assert activated["name"] == "release-notes"
    assert activated["instructions"].startswith("# Release notes")
    assert activated["resources"] == ["references/style.md"]
    assert (
        last_result(fake_model, cid, 1)
        == "Write in the past tense. One line per change. No emoji.\n"
    )
    assert last_result(fake_model, cid, 2).startswith("Error: there is no skill 'hidden'")

    # The next turn: the new skill reaches the model as a reminder after the cached prompt,
    # which is byte for byte the same; activate_skill finds it.
    fake_model.script(cid, tool_call("activate_skill", {"name": "haiku"}), text("Leaves fall."))
    before = len(requests)
    assert (await conversation.run_turn("A poem?")).status == "completed"
    later = fake_model.requests(cid)[before:]
    assert _system(later[0]) == system
    reminder = later[0]["body"]["messages"][-1]
    assert reminder["role"] == "user" and "- haiku: Answer in a haiku" in reminder["content"]
    assert json.loads(tool_results(later[1])[-1])["instructions"] == "Count the syllables."

    # Edited in the workspace mid-conversation: the next turn reads the new description.
    edited = skill.replace("three lines, 5-7-5", "always about autumn")
    fake_model.script(
        cid,
        tool_call("write", {"path": ".agents/skills/haiku/SKILL.md", "content": edited}),
        text("ok"),
    )
    assert (await conversation.run_turn("Change it.")).status == "completed"
    fake_model.script(cid, text("Autumn."))
    before = len(fake_model.requests(cid))
    assert (await conversation.run_turn("Again?")).status == "completed"
    final = fake_model.requests(cid)[before]
    assert _system(final) == system
    assert "- haiku: Answer in a haiku: always about autumn." in json.dumps(
        final["body"]["messages"][-1]
    )


# -- fetch ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs_server() -> Iterator[Any]:
    with local_server() as server:
        yield server


async def test_the_fetch_tools_end_to_end(
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    api: httpx.AsyncClient,
    stack: Stack,
    docs_server: Any,
    cid: str,
) -> None:
    conversation = service.conversation(Fetcher, cid)
    await conversation.configure({"port": docs_server.port})
    fake_model.script(
        cid,
        tool_call("fetch_docs", {"path": "/v1/docs/echo"}),
        tool_call("fetch_url", {"url": "http://docs.example.com/v1/docs/page"}),
        tool_call("fetch_url", {"url": "http://169.254.169.254/latest/meta-data/"}),
        tool_call(
            "fetch_url", {"url": "http://docs.example.com/v1/docs/go/?to=http://127.1:PORT/"}
        ),
        tool_call("fetch_docs", {"path": "/admin"}),
        tool_call("fetch_docs", {"path": "/v1/docs/bin", "response": "workspace"}),
        text("Read."),
    )
    assert (await conversation.run_turn("Look it up.")).status == "completed"
    answers = [json.loads(last_result(fake_model, cid, i)) for i in range(5)]
    echoed = {k.lower(): v for k, v in answers[0]["json"].items()}
    assert answers[0]["ok"] is True and echoed["x-agent"] == "think"
    assert "x-agent" not in json.dumps(fake_model.requests(cid)[0]["body"])  # server-side only
    assert answers[1]["ok"] is True and answers[1]["body"] == "# Limits\n\nAt most 10 requests."
    assert answers[1]["final_url"] == "http://docs.example.com/v1/docs/page"
    assert answers[2]["code"] == "disallowed_url" and "link-local" in answers[2]["message"]
    assert answers[3]["code"] == "disallowed_redirect"
    assert answers[4]["code"] == "disallowed_url"
    assert "LeakAttempt" not in json.dumps(answers)
    saved = json.loads(last_result(fake_model, cid, 5))
    assert saved["ok"] is True and saved["response"] == "workspace", saved
    assert saved["path"].startswith("/workspace/fetched/127.0.0.1/")
    kept = await api.get(f"/v1/agents/fetcher/conversations/{cid}/workspace{saved['path'][10:]}")
    assert kept.content == bytes(range(256))
    assert kept.headers["content-type"] == "application/octet-stream"
    got = await emitted(stack, cid, "chat.turn.finished")
    fetches = [e for e in got if e.type == "tool.fetch"]
    assert [(e.tool_name, e.ok, e.code) for e in fetches] == [
        ("fetch_docs", True, None),
        ("fetch_url", True, None),
        ("fetch_url", False, "disallowed_url"),
        ("fetch_url", False, "disallowed_redirect"),
        ("fetch_docs", False, "disallowed_url"),
        ("fetch_docs", True, None),
    ]
    assert fetches[3].redirects == 1


@pytest.mark.parametrize("row", [WorkspaceFileRow, WorkspaceOpRow, WorkspaceUsageRow])
async def test_the_workspace_tables_match_their_mirror(engine: AsyncEngine, row: Any) -> None:
    async with engine.connect() as db:
        rows = (
            await db.execute(
                sql(
                    "SELECT column_name, is_nullable FROM information_schema.columns "
                    "WHERE table_name = :t ORDER BY ordinal_position"
                ),
                {"t": row.__tablename__},
            )
        ).all()
    mirror = [(c.name, "YES" if c.nullable else "NO") for c in row.__table__.columns]
    assert [tuple(r) for r in rows] == mirror
