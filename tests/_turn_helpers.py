"""What turn tests share: where the `helper` agent's conversations live, a wait-mode turn, a
turn polled to a status, a tool call's part, what the model was sent, a slow scripted answer,
waiting until a turn visibly streams, a transcript as (role, text) pairs, and the rows stored
under a conversation id.

Shared test helpers live only in `tests/_*.py`, one definition each; test modules never import
from one another."""

from __future__ import annotations

import asyncio
import json
from typing import Any, NamedTuple

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._sse import deltas, read_until
from think import StreamCallback, ThinkService, UIMessage
from think._messages import new_id
from think.storage import Admission, TurnRecord, TurnRequest
from think.streaming import read
from think.testing import FakeOpenAIServer, Reply, reply, text

SLOW = [f"w{i} " for i in range(40)]  # ~1.5 s of streaming at 0.04 s a chunk


def slow(words: list[str] = SLOW) -> Reply:
    return reply(text(*words), delay=0.04)


def transcript(messages: list[UIMessage]) -> list[tuple[str, str]]:
    """(role, text) per message, the text of its text parts joined."""
    return [
        (m.role, "".join(str(p.get("text", "")) for p in m.parts if p.get("type") == "text"))
        for m in messages
    ]


async def streaming(api: httpx.AsyncClient, agent: str, cid: str, turn_id: str) -> None:
    """Until the turn's answer is visibly streaming."""
    url = f"/v1/agents/{agent}/conversations/{cid}/turns/{turn_id}/stream"
    await asyncio.wait_for(read_until(api, url, deltas(2)), timeout=30)


def activity_attempts(events: Any, activity_type: str | None = None) -> list[int]:
    """The attempt at which each of a workflow's activities completed (or last started),
    in order, from its history: local activities (a turn's steps and most tools) record it in
    their marker, regular ones in their started event."""
    types = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    found = []
    for event in events:
        if event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            if activity_type in (None, types.get(started.scheduled_event_id)):
                found.append(started.attempt)
        elif event.HasField("marker_recorded_event_attributes"):
            data = event.marker_recorded_event_attributes.details["data"].payloads[0].data
            marker = json.loads(data)
            if activity_type in (None, marker["activity_type"]):
                found.append(int(marker["attempt"]))
    return found


def helper_path(cid: str) -> str:
    """The `helper` agent's conversation `cid`, as a path below the gateway."""
    return f"/v1/agents/helper/conversations/{cid}"


async def wait_turn(
    api: httpx.AsyncClient,
    agent: str,
    cid: str,
    input: Any = "q",
    *,
    status: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Submit a turn in wait mode (more request fields in `fields`, e.g. `body`) and answer
    the turn as the gateway does, once the 200 is asserted; with `status`, that it ended so."""
    url = f"/v1/agents/{agent}/conversations/{cid}/turns"
    response = await api.post(url, json={"input": input, "mode": "wait", **fields})
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    if status is not None:
        assert turn["status"] == status, turn
    return turn


async def until_status(
    api: httpx.AsyncClient, url: str, statuses: set[str], within: float = 30
) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        turn: dict[str, Any] = (await api.get(url)).json()
        if turn["status"] in statuses or asyncio.get_running_loop().time() > deadline:
            return turn
        await asyncio.sleep(0.1)


def tool_part(turn: dict[str, Any], call_id: str) -> dict[str, Any]:
    part: dict[str, Any] = next(
        p for p in turn["message"]["parts"] if p.get("toolCallId") == call_id
    )
    return part


def sent(fake_model: FakeOpenAIServer, cid: str, call: int) -> list[dict[str, Any]]:
    """The Chat Completions messages of the model's `call`-th request for the conversation."""
    found: list[dict[str, Any]] = fake_model.requests(cid)[call]["body"]["messages"]
    return found


class CallbackRecorder(StreamCallback):
    """A `chat()` callback that appends what it is told to `calls`: ("start", request id),
    each chunk's type, "done", ("error", message) and "interrupted"."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def on_start(self, request_id: str) -> None:
        self.calls.append(("start", request_id))

    async def on_event(self, chunk: dict[str, Any]) -> None:
        self.calls.append(chunk["type"])

    def on_done(self) -> None:
        self.calls.append("done")

    def on_error(self, message: str) -> None:
        self.calls.append(("error", message))

    def on_interrupted(self) -> None:
        self.calls.append("interrupted")


async def pending_turn(service: ThinkService, cid: str) -> TurnRecord:
    """A turn recorded as `helper`'s in conversation `cid`, "hi", as admission records one (to
    an idle conversation: started, its stream opened with `start`), but with no workflow
    started for it (the test starts one, or writes its stream, itself)."""
    message = UIMessage(id=new_id("msg"), role="user", parts=[{"type": "text", "text": "hi"}])
    admission = await service.store.admit_turn(
        tenant="default",
        agent="helper",
        conversation_id=cid,
        request=TurnRequest(messages=[message]),
        request_hash=f"pending-{cid}",
        idempotency_key=None,
    )
    return admission.turn


async def chunk_types(service: ThinkService, turn_id: str) -> list[str]:
    """The types of the chunks in the turn's stream log, in order."""
    async with service.store.db.connection() as conn:
        return [chunk["type"] for _, chunk in await read(conn, turn_id, -1)]


class StoredRows(NamedTuple):
    conversations: int
    turns: int
    messages: int


async def stored_rows(engine: AsyncEngine, cid: str) -> StoredRows:
    """Rows of conversations, turns and messages stored under conversation id `cid`."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                sql(
                    "SELECT (SELECT count(*) FROM conversations WHERE id = :c),"
                    " (SELECT count(*) FROM turns t JOIN conversations c"
                    "  ON c.uid = t.conversation_uid WHERE c.id = :c),"
                    " (SELECT count(*) FROM messages m JOIN conversations c"
                    "  ON c.uid = m.conversation_uid WHERE c.id = :c)"
                ),
                {"c": cid},
            )
        ).one()
    return StoredRows(int(row[0]), int(row[1]), int(row[2]))


class CommitFailed(Exception):
    """Raised inside an admission's transaction, which then rolls back: a failed commit."""


def fail_admissions(service: ThinkService, monkeypatch: pytest.MonkeyPatch) -> list[Admission]:
    """Make the service's admissions fail their commit, after the turn's row is inserted and
    `on_inserted` (which may send the workflow's start) has run; the admissions that got so far,
    as `on_inserted` saw them."""
    record = service.store.admit_turn
    seen: list[Admission] = []

    async def admit_then_fail(**kwargs: Any) -> Admission:
        inserted = kwargs.pop("on_inserted")

        def fail(admission: Admission) -> None:
            inserted(admission)
            seen.append(admission)
            raise CommitFailed

        return await record(on_inserted=fail, **kwargs)

    monkeypatch.setattr(service.store, "admit_turn", admit_then_fail)
    return seen


async def stored_texts(api: httpx.AsyncClient, agent: str, cid: str) -> list[tuple[str, str]]:
    """The conversation's active path as `GET …/messages` lists it: (role, text) each."""
    response = await api.get(f"/v1/agents/{agent}/conversations/{cid}/messages")
    assert response.status_code == 200, response.text
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"]))
        for m in response.json()["messages"]
    ]
