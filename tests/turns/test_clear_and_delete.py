"""Clearing a conversation (`POST …/clear`, `ConversationState.clear`) and deleting one
(`DELETE …/conversations/{cid}`, `ConversationState.delete`), on the real stack.

A clear skips the queue, cancels the running or paused turn and drops the other ended
records; the next turn's model reads none of the old messages, which stay in the tree
(`clear_history = "keep"`) or are gone (`"delete"`). A delete leaves no row of the
conversation in any table, no schedule and no running workflow, and the id starts afresh.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from tests._sse import chunks, read_stream
from tests._stack import Stack, bearer_client
from tests._turn_helpers import sent, stored_texts, streaming, tool_part, wait_turn
from tests.agents import Eraser, Remembering
from think import Think, ThinkService, UIMessage, UserError
from think.schedules import ScheduleRef
from think.storage import skipped_chunks
from think.testing import FakeOpenAIServer, reply, text, tool_call
from think.workflows.names import turn_workflow_id

LONG = reply(text(*[f"w{i} " for i in range(200)]), delay=0.05)  # ~10 s unless cancelled
CLEARED = "the conversation was cleared"


def base(agent: str, cid: str) -> str:
    return f"/v1/agents/{agent}/conversations/{cid}"


async def submit(api: httpx.AsyncClient, agent: str, cid: str, text: str) -> dict[str, Any]:
    response = await api.post(f"{base(agent, cid)}/turns", json={"input": text})
    assert response.status_code == 202, response.text
    turn: dict[str, Any] = response.json()
    return turn


def user_texts(fake_model: FakeOpenAIServer, cid: str) -> list[str]:
    """What the model's latest request for the conversation held, but its system prompt."""
    return [str(m["content"]) for m in sent(fake_model, cid, -1) if m["role"] != "system"]


async def row(engine: AsyncEngine, query: str, **params: Any) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(sql(query), params)).one()


async def uid_of(engine: AsyncEngine, agent: str, cid: str) -> str:
    found = await row(
        engine, "SELECT uid FROM conversations WHERE agent = :a AND id = :c", a=agent, c=cid
    )
    return str(found[0])


async def workflow_status(temporal: Client, agent: str, cid: str, turn_id: str) -> Any:
    handle = temporal.get_workflow_handle(turn_workflow_id(agent, cid, turn_id))
    return (await handle.describe()).status


async def test_clear_skips_the_queue_cancels_the_running_turn_and_starts_afresh(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    service: ThinkService,
    engine: AsyncEngine,
    temporal: Client,
    cid: str,
) -> None:
    fake_model.script(cid, text("one"), LONG, text("fresh"))
    first = await wait_turn(api, "helper", cid, "first?", status="completed")
    conv = service.conversation("helper", cid)
    await conv.configure({"tone": "dry"})
    await (await conv.workspace()).write("notes.txt", b"kept")
    running = await submit(api, "helper", cid, "second?")
    queued = await submit(api, "helper", cid, "third?")
    assert queued["status"] == "pending"
    await streaming(api, "helper", cid, running["turn_id"])

    cleared = await api.post(f"{base('helper', cid)}/clear")
    assert cleared.status_code == 200, cleared.text
    body = cleared.json()
    assert (body["id"], body["agent"], body["active_leaf_id"]) == (cid, "helper", None)

    # The queued submission ended skipped, its stream as a skipped one's ends; the running
    # turn was cancelled, its workflow closed; the turn that had ended before is gone.
    skipped = (await api.get(queued["status_url"])).json()
    assert (skipped["status"], skipped["error"]) == ("skipped", f"skipped: {CLEARED}")
    _, events = await read_stream(api, queued["stream_url"])
    assert chunks(events) == skipped_chunks(CLEARED)
    aborted = (await api.get(running["status_url"])).json()
    assert (aborted["status"], aborted["error"]) == ("aborted", CLEARED)
    status = await workflow_status(temporal, "helper", cid, running["turn_id"])
    assert status != WorkflowExecutionStatus.RUNNING
    assert (await api.get(first["status_url"])).status_code == 404
    listed = (await api.get(f"{base('helper', cid)}/turns")).json()["turns"]
    assert {t["turn_id"] for t in listed} == {running["turn_id"], queued["turn_id"]}
    gone = "SELECT count(*) FROM stream_chunks WHERE turn_id = :t"
    assert (await row(engine, gone, t=first["turn_id"]))[0] == 0

    # The history stays in the tree, off the active path; the configuration and the
    # workspace stay.
    assert await stored_texts(api, "helper", cid) == []
    hits = (await api.get(f"{base('helper', cid)}/search", params={"q": "first"})).json()
    assert [h["role"] for h in hits["hits"]] == ["user"]
    answer = first["message"]["id"]
    siblings = await api.get(f"{base('helper', cid)}/messages/{answer}/siblings")
    assert siblings.status_code == 200 and siblings.json()["active_index"] is None
    assert await conv.get_config() == {"tone": "dry"}
    notes = await (await conv.workspace()).read("notes.txt")
    assert notes is not None and notes.data == b"kept"

    # The next turn starts a new root: the model reads none of the old messages.
    again = await wait_turn(api, "helper", cid, "again?", status="completed")
    assert user_texts(fake_model, cid) == ["again?"]
    assert await stored_texts(api, "helper", cid) == [("user", "again?"), ("assistant", "fresh")]
    assert again["message"]["id"] != answer


async def test_clear_rebuilds_the_system_prompt_and_keeps_the_memory(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    service: ThinkService,
    engine: AsyncEngine,
    cid: str,
) -> None:
    fake_model.script(cid, text("one"), text("two"))
    await wait_turn(api, "remembering", cid, "hi", status="completed")
    prompt = "SELECT system_prompt FROM conversations WHERE agent = 'remembering' AND id = :c"
    assert (await row(engine, prompt, c=cid))[0] is not None  # frozen by the first step
    conv = service.conversation(Remembering, cid)
    await conv.set_context("memory", "likes tea")

    assert (await api.post(f"{base('remembering', cid)}/clear")).status_code == 200
    assert (await row(engine, prompt, c=cid))[0] is None
    assert await conv.get_context() == {"memory": "likes tea"}

    await wait_turn(api, "remembering", cid, "hello?", status="completed")
    [system, *rest] = sent(fake_model, cid, -1)
    assert "likes tea" in system["content"]
    assert [m["content"] for m in rest] == ["hello?"]
    assert (await row(engine, prompt, c=cid))[0] == system["content"]


async def test_clear_cancels_a_turn_paused_for_approval(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}), text("after"))
    paused = await wait_turn(api, "gatekeeper", cid, "rm x", status="awaiting_approval")
    cleared = await api.post(f"{base('gatekeeper', cid)}/clear")
    assert cleared.status_code == 200, cleared.text
    ended = (await api.get(paused["status_url"])).json()
    assert (ended["status"], ended["error"]) == ("aborted", CLEARED)
    status = await workflow_status(temporal, "gatekeeper", cid, paused["turn_id"])
    assert status != WorkflowExecutionStatus.RUNNING
    await wait_turn(api, "gatekeeper", cid, "hello?", status="completed")
    assert user_texts(fake_model, cid) == ["hello?"]


async def test_clear_history_delete_removes_the_messages(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    fake_model.script(cid, text("one"), text("two"), LONG, text("fresh"))
    await wait_turn(api, "eraser", cid, "secret one", status="completed")
    await wait_turn(api, "eraser", cid, "secret two", status="completed")
    running = await submit(api, "eraser", cid, "secret three")
    await streaming(api, "eraser", cid, running["turn_id"])
    uid = await uid_of(engine, "eraser", cid)

    cleared = await api.post(f"{base('eraser', cid)}/clear")
    assert cleared.status_code == 200, cleared.text

    counts = await row(
        engine,
        "SELECT (SELECT count(*) FROM messages WHERE conversation_uid = :u),"
        " (SELECT count(*) FROM compactions WHERE conversation_uid = :u),"
        " (SELECT count(*) FROM turns WHERE conversation_uid = :u),"
        " (SELECT count(*) FROM conversations WHERE uid = :u AND active_leaf_id IS NULL"
        "  AND system_prompt IS NULL)",
        u=uid,
    )
    assert tuple(counts) == (0, 0, 1, 1)
    # The cancelled turn's record stays, saying how it ended, without its words.
    ended = (await api.get(running["status_url"])).json()
    assert (ended["status"], ended["error"], ended["message"]) == ("aborted", CLEARED, None)
    words = await row(
        engine,
        "SELECT t.request::text, (SELECT count(*) FROM stream_chunks s WHERE s.turn_id = t.id)"
        " FROM turns t WHERE t.conversation_uid = :u",
        u=uid,
    )
    assert "secret" not in words[0] and words[1] == 1
    search = await api.get(f"{base('eraser', cid)}/search", params={"q": "secret"})
    assert search.json()["hits"] == []

    await wait_turn(api, "eraser", cid, "again?", status="completed")
    assert user_texts(fake_model, cid) == ["again?"]


async def _rows_of(engine: AsyncEngine, uid: str, turn_ids: list[str]) -> dict[str, int]:
    """The rows of every table that names the conversation, and of those naming its turns."""
    async with engine.connect() as conn:
        tables = (
            await conn.execute(
                sql(
                    "SELECT table_name FROM information_schema.columns "
                    "WHERE column_name = 'conversation_uid' AND table_schema = current_schema()"
                )
            )
        ).scalars()
        found = {}
        for table in sorted(tables):
            query = f"SELECT count(*) FROM {table} WHERE conversation_uid = :u"
            found[table] = (await conn.execute(sql(query), {"u": uid})).scalar_one()
        for table in ("conversations", "stream_chunks", "turn_answers"):
            column = "uid" if table == "conversations" else "turn_id"
            query = f"SELECT count(*) FROM {table} WHERE {column} = ANY(:ids)"
            ids = [uid] if table == "conversations" else turn_ids
            found[f"{table}.{column}"] = (await conn.execute(sql(query), {"ids": ids})).scalar_one()
    return found


def _complaints(stack: Stack, cid: str) -> list[str]:
    """The worker's warnings and errors about the conversation."""
    lines = "\n".join(p.read_text(errors="replace") for p in stack.logs.glob("worker-*.log"))
    return [
        line
        for line in lines.splitlines()
        if cid in line and (" WARNING " in line or " ERROR " in line or "Traceback" in line)
    ]


async def test_delete_leaves_nothing_of_the_conversation(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    service: ThinkService,
    engine: AsyncEngine,
    temporal: Client,
    stack: Stack,
    cid: str,
) -> None:
    fake_model.script(cid, text("one"), LONG, text("fresh"))
    conv = service.conversation(Eraser, cid)
    await conv.configure({"reminder": "Water the plants."})
    assert await conv.reconcile_scheduled_tasks() == 1
    schedule = temporal.get_schedule_handle(
        ScheduleRef(service.settings.task_queue, "eraser", "reminder", "default", cid).schedule_id
    )
    await schedule.describe()
    await (await conv.workspace()).write("plan.md", b"# the plan")
    done = await wait_turn(api, "eraser", cid, "first?", status="completed")
    running = await submit(api, "eraser", cid, "second?")
    queued = await submit(api, "eraser", cid, "third?")
    await streaming(api, "eraser", cid, running["turn_id"])
    uid = await uid_of(engine, "eraser", cid)
    turn_ids = [done["turn_id"], running["turn_id"], queued["turn_id"]]
    before = await _rows_of(engine, uid, turn_ids)
    assert before["workspace_files"] == 1 and before["messages"] >= 3

    deleted = await api.delete(base("eraser", cid))
    assert deleted.status_code == 204, deleted.text
    assert deleted.content == b""

    assert set((await _rows_of(engine, uid, turn_ids)).values()) == {0}
    status = await workflow_status(temporal, "eraser", cid, running["turn_id"])
    assert status != WorkflowExecutionStatus.RUNNING
    with pytest.raises(RPCError) as no_schedule:
        await schedule.describe()
    assert no_schedule.value.status == RPCStatusCode.NOT_FOUND
    assert (await api.get(base("eraser", cid))).status_code == 404
    assert _complaints(stack, cid) == []

    # The same id again: a new conversation, empty.
    await wait_turn(api, "eraser", cid, "hello again?", status="completed")
    assert user_texts(fake_model, cid) == ["hello again?"]
    assert await uid_of(engine, "eraser", cid) != uid
    assert (await api.get(f"{base('eraser', cid)}/turns")).json()["turns"][0]["status"] == (
        "completed"
    )
    assert await (await conv.workspace()).list() == []
    assert await conv.get_config() == {}


async def test_unknown_conversations_are_a_404_problem(api: httpx.AsyncClient, cid: str) -> None:
    for method, path in [("DELETE", ""), ("POST", "/clear")]:
        response = await api.request(method, f"{base('helper', cid)}{path}")
        assert response.status_code == 404, (method, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert cid in response.json()["detail"]


async def test_another_tenant_can_neither_clear_nor_delete(
    tenants: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("alice's answer"))
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        await wait_turn(alice, "helper", cid, "alice asks", status="completed")
        for method, path in [("POST", "/clear"), ("DELETE", "")]:
            refused = await bob.request(method, f"{base('helper', cid)}{path}")
            assert refused.status_code == 404, (method, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
        assert await stored_texts(alice, "helper", cid) == [
            ("user", "alice asks"),
            ("assistant", "alice's answer"),
        ]
        assert (await alice.delete(base("helper", cid))).status_code == 204
        assert (await alice.get(base("helper", cid))).status_code == 404


async def test_clear_and_delete_from_python(service: ThinkService, cid: str) -> None:
    conv = service.conversation("helper", cid)
    await conv.clear()  # nothing to clear: nothing happens
    assert await conv.delete() is False
    await conv.add_messages(
        [
            UIMessage.user_text("remember the lighthouse", id="m1"),
            UIMessage(id="m2", role="assistant", parts=[{"type": "text", "text": "noted"}]),
        ]
    )
    await conv.configure({"tone": "dry"})
    await conv.clear()
    assert await conv.messages() == []
    assert [hit.message_id for hit in await conv.search("lighthouse")] == ["m1"]
    assert await conv.get_config() == {"tone": "dry"}
    await conv.add_messages(UIMessage.user_text("a new start", id="m3"))
    assert [m.id for m in await conv.messages()] == ["m3"]  # a new root
    assert await conv.delete() is True
    assert await conv.messages() == []
    assert await conv.search("lighthouse") == []
    assert await conv.get_config() == {}


async def test_a_clear_from_inside_its_own_turn_is_refused(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """It would wait for the very turn asking it to end: a deadlock, refused instead."""
    fake_model.script(cid, tool_call("wipe", {}, id="call_wipe"), text("still here"))
    done = await wait_turn(api, "eraser", cid, "wipe it", status="completed")
    output = tool_part(done, "call_wipe")["output"]
    assert output.startswith("refused: clearing the conversation inside turn"), output
    assert "deadlock" in output and "on_chat_response" in output
    assert await stored_texts(api, "eraser", cid) == [
        ("user", "wipe it"),
        ("assistant", "still here"),
    ]


def test_clear_history_is_keep_or_delete() -> None:
    assert (Think.clear_history, Eraser.clear_history) == ("keep", "delete")
    with pytest.raises(UserError, match=r"Shredder.clear_history='shred' must be 'keep'"):

        class Shredder(Think):
            clear_history = "shred"
