"""The A2A endpoint (`/a2a/{agent}`), driven by `a2a-sdk`'s own client against the real
gateway (with API keys: alice's and bob's tenants), its workers and the fake model.

A context is a conversation and a task a turn, so each test starts its context with one
unscripted turn (the fake model echoes it), then scripts the model for that conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, InvalidRequestError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from tests._stack import Stack, extra_gateway
from think.testing import FakeOpenAIServer, reply, text, tool_call

pytestmark = pytest.mark.stack

WORDS = [f"w{i} " for i in range(40)]
ALICE, BOB = "alice-key", "bob-key"


@contextlib.asynccontextmanager
async def a2a(base: str, agent: str, key: str, *, streaming: bool) -> AsyncIterator[Client]:
    """The SDK's client for `agent`, built from its card, sending `key` as a bearer token."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    client = await create_client(
        f"{base}/a2a/{agent}", ClientConfig(httpx_client=http, streaming=streaming)
    )
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def message(
    words: str, *, context_id: str = "", task_id: str = "", message_id: str | None = None
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=message_id or uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=words)],
            context_id=context_id,
            task_id=task_id,
        )
    )


async def send(client: Client, request: SendMessageRequest) -> Task:
    """A blocking send: the one task it answers with."""
    answers = [r async for r in client.send_message(request)]
    assert len(answers) == 1 and answers[0].HasField("task"), answers
    return answers[0].task


def generator(events: AsyncIterator[StreamResponse]) -> AsyncGenerator[StreamResponse]:
    """The SDK's stream as what it is, an async generator: closing it drops the connection."""
    assert isinstance(events, AsyncGenerator)
    return events


def answer_text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


def streamed_text(events: list[StreamResponse]) -> str:
    """The artifact as the events build it: `append: false` starts it again."""
    built = ""
    for event in events:
        if event.HasField("artifact_update"):
            piece = "".join(p.text for p in event.artifact_update.artifact.parts)
            built = built + piece if event.artifact_update.append else piece
    return built


def last_state(events: list[StreamResponse]) -> TaskState:
    statuses = [e.status_update.status.state for e in events if e.HasField("status_update")]
    return statuses[-1]


async def new_context(base: str, agent: str, key: str = ALICE) -> str:
    """A context (a conversation) with one echoed exchange: its id."""
    async with a2a(base, agent, key, streaming=False) as client:
        task = await send(client, message("hello"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    return task.context_id


async def test_the_card_describes_the_agent_and_its_endpoint(tenants: str) -> None:
    async with httpx.AsyncClient(base_url=tenants, timeout=30) as http:
        card = (await http.get("/a2a/helper/.well-known/agent-card.json")).json()
        same = (await http.get("/.well-known/agent-card.json", params={"agent": "helper"})).json()
        unknown = await http.get("/a2a/nobody/.well-known/agent-card.json")
        unknown_too = await http.get("/.well-known/agent-card.json", params={"agent": "nobody"})
    assert card == same
    assert card["name"] == "helper"
    assert card["description"] == "The agent most tests talk to."
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"] == [
        {"url": f"{tenants}/a2a/helper", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert [s["id"] for s in card["skills"]] == ["helper"]
    assert unknown.status_code == unknown_too.status_code == 404


async def test_send_answers_and_a_context_continues(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    async with a2a(tenants, "helper", ALICE, streaming=False) as client:
        first = await send(client, message("hello there", message_id="m-first"))
        assert first.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(first) == "echo: hello there"
        # A resent message is the same task (its id is the turn's idempotency key).
        again = await send(client, message("hello there", message_id="m-first"))
        assert (again.id, again.context_id) == (first.id, first.context_id)

        fake_model.script(first.context_id, text("The second answer."))
        second = await send(client, message("and then?", context_id=first.context_id))
        assert second.context_id == first.context_id and second.id != first.id
        assert answer_text(second) == "The second answer."
        # The model saw the whole conversation: the context is the conversation.
        sent = fake_model.requests(first.context_id)[-1]["body"]["messages"]
        assert any("echo: hello there" in json.dumps(m) for m in sent)

        read = await client.get_task(GetTaskRequest(id=second.id))

        # returnImmediately: the task as admitted; a message after it queues behind it.
        quick = SendMessageRequest(
            message=message("quick", context_id=first.context_id).message,
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        admitted = await send(client, quick)
        assert admitted.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        await send(client, message("after it", context_id=first.context_id))
        answered = await client.get_task(GetTaskRequest(id=admitted.id, history_length=1))
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert [m.role for m in answered.history] == [Role.ROLE_AGENT]
    assert answer_text(answered) == "echo: quick"
    assert read.status.state == TaskState.TASK_STATE_COMPLETED
    assert [m.role for m in read.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
    assert read.history[0].parts[0].text == "and then?"
    assert read.status.message.parts[0].text == "The second answer."


async def test_a_streamed_turn_arrives_in_order_and_completes(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    cid = await new_context(tenants, "helper")
    fake_model.script(cid, reply(text(*WORDS), delay=0.01))
    async with a2a(tenants, "helper", ALICE, streaming=True) as client:
        events = [e async for e in client.send_message(message("count", context_id=cid))]
    assert events[0].HasField("task") and events[0].task.context_id == cid
    assert streamed_text(events) == "".join(WORDS)
    pieces = [e for e in events if e.HasField("artifact_update")]
    assert len(pieces) > 1 and not pieces[0].artifact_update.append
    assert all(p.artifact_update.append for p in pieces[1:])
    assert last_state(events) == TaskState.TASK_STATE_COMPLETED


async def test_cancel_a_long_turn(tenants: str, fake_model: FakeOpenAIServer) -> None:
    cid = await new_context(tenants, "helper")
    fake_model.script(cid, reply(text(*WORDS), delay=0.25))  # ten seconds of words
    async with (
        a2a(tenants, "helper", ALICE, streaming=True) as client,
        a2a(tenants, "helper", ALICE, streaming=False) as other,
    ):
        events: list[StreamResponse] = []
        async for event in client.send_message(message("talk long", context_id=cid)):
            events.append(event)
            if (
                event.HasField("artifact_update")
                and len([e for e in events if e.HasField("artifact_update")]) == 3
            ):
                cancelled = await other.cancel_task(CancelTaskRequest(id=events[0].task.id))
                assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert last_state(events) == TaskState.TASK_STATE_CANCELED
    assert len(streamed_text(events)) < len("".join(WORDS))


async def test_resubscribe_after_a_dropped_stream_gets_the_rest(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    cid = await new_context(tenants, "helper")
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))
    async with a2a(tenants, "helper", ALICE, streaming=True) as client:
        seen: list[StreamResponse] = []
        stream = generator(client.send_message(message("talk", context_id=cid)))
        async for event in stream:
            seen.append(event)
            if len([e for e in seen if e.HasField("artifact_update")]) >= 5:
                break
        await stream.aclose()  # the connection drops mid-turn
        task_id = seen[0].task.id
        rest = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert rest[0].HasField("task") and rest[0].task.id == task_id
    assert streamed_text(seen) != "".join(WORDS)
    assert streamed_text(rest) == "".join(WORDS)
    assert last_state(rest) == TaskState.TASK_STATE_COMPLETED


async def test_an_approval_is_input_required_and_a_reply_answers_it(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    cid = await new_context(tenants, "gatekeeper")
    fake_model.script(
        cid, tool_call("delete_file", {"path": "notes.txt"}, id="call_1"), text("Deleted it.")
    )
    async with a2a(tenants, "gatekeeper", ALICE, streaming=True) as client:
        asked = [e async for e in client.send_message(message("delete notes", context_id=cid))]
        assert last_state(asked) == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id = asked[0].task.id
        request = asked[-1].status_update.status.message
        data = MessageToDict(request.parts[1].data)
        assert data["requests"][0]["tool_name"] == "delete_file"
        assert data["requests"][0]["input"] == {"path": "notes.txt"}

        rest = [
            e
            async for e in client.send_message(message("approve", context_id=cid, task_id=task_id))
        ]
        assert streamed_text(rest) == "Deleted it."
        assert last_state(rest) == TaskState.TASK_STATE_COMPLETED
        done = await client.get_task(GetTaskRequest(id=task_id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    # The tool ran once, approved, and the model was asked twice (the call, then the answer).
    async with httpx.AsyncClient(
        base_url=tenants, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30
    ) as http:
        turn = (await http.get(f"/v1/agents/gatekeeper/conversations/{cid}/turns/{task_id}")).json()
    calls = [p for p in turn["message"]["parts"] if p["type"] == "tool-delete_file"]
    assert len(calls) == 1, calls
    assert calls[0]["state"] == "output-available"
    assert calls[0]["output"] == "deleted notes.txt"
    assert calls[0]["approval"]["approved"] is True
    assert fake_model.calls(cid) == 3


async def test_bad_requests_get_protocol_errors(tenants: str) -> None:
    cid = await new_context(tenants, "helper")
    async with a2a(tenants, "helper", ALICE, streaming=False) as alice:
        alices = await send(alice, message("mine", context_id=cid))
    # Bob's key: alice's task and context do not exist for him, in the protocol's words.
    async with a2a(tenants, "helper", BOB, streaming=True) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=alices.id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=alices.id))
        with pytest.raises(TaskNotFoundError):
            _ = [e async for e in bob.subscribe(SubscribeToTaskRequest(id=alices.id))]
        with pytest.raises(TaskNotFoundError):
            _ = [e async for e in bob.send_message(message("yes", task_id=alices.id))]
        with pytest.raises(InvalidParamsError, match="no context"):
            await send(bob, message("theirs?", context_id=cid))
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id="turn_nothing-of-the-kind"))

    bearer = {"Authorization": f"Bearer {ALICE}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=tenants, headers=bearer, timeout=30) as http:
        malformed = await http.post("/a2a/helper", content=b'{"jsonrpc": "2.0", "id": 1,')
        unknown_method = await http.post(
            "/a2a/helper", json={"jsonrpc": "2.0", "id": 2, "method": "Nope", "params": {}}
        )
        bad_params = await http.post(
            "/a2a/helper",
            json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": 7}},
        )
        unknown_agent = await http.post(
            "/a2a/nobody",
            json={"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": alices.id}},
        )
        # The v0.3 method names are served too (no A2A-Version header: 0.3).
        legacy = await http.post(
            "/a2a/helper",
            headers={"A2A-Version": ""},
            json={"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"id": alices.id}},
        )
        legacy_send = await http.post(
            "/a2a/helper",
            headers={"A2A-Version": ""},
            json={
                "jsonrpc": "2.0",
                "id": 7,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": uuid.uuid4().hex,
                        "role": "user",
                        "contextId": cid,
                        "parts": [{"kind": "text", "text": "old words"}],
                    }
                },
            },
        )
        unauthenticated = await http.post(
            "/a2a/helper",
            headers={"Authorization": ""},
            json={"jsonrpc": "2.0", "id": 6, "method": "GetTask", "params": {"id": alices.id}},
        )
    assert malformed.status_code == 200 and malformed.json()["error"]["code"] == -32700
    assert unknown_method.json()["error"]["code"] == -32601
    assert bad_params.json()["error"]["code"] == -32602
    assert unknown_agent.status_code == 404
    assert unknown_agent.json()["error"]["code"] == -32600
    assert "nobody" in unknown_agent.json()["error"]["message"]
    assert legacy.json()["result"]["id"] == alices.id, legacy.json()
    assert legacy.json()["result"]["status"]["state"] == "completed"
    sent = legacy_send.json()["result"]
    assert (sent["kind"], sent["contextId"]) == ("task", cid), sent
    assert sent["status"]["state"] == "completed"
    assert sent["artifacts"][0]["parts"][0]["text"] == "echo: old words"
    assert unauthenticated.status_code == 401


async def test_a_denial_as_a_data_part_in_a_blocking_send(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    cid = await new_context(tenants, "gatekeeper")
    fake_model.script(
        cid, tool_call("delete_file", {"path": "keep.txt"}, id="call_k"), text("Kept it.")
    )
    async with a2a(tenants, "gatekeeper", ALICE, streaming=False) as client:
        paused = await send(client, message("delete keep.txt", context_id=cid))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # Not an answer: the task says what it waits for.
        with pytest.raises(InvalidParamsError, match="approve or deny"):
            await send(client, message("maybe?", context_id=cid, task_id=paused.id))
        no = SendMessageRequest(
            message=Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_USER,
                context_id=cid,
                task_id=paused.id,
                parts=[Part(data=ParseDict({"approved": False, "reason": "keep it"}, Value()))],
            )
        )
        done = await send(client, no)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(done) == "Kept it."
    async with httpx.AsyncClient(
        base_url=tenants, headers={"Authorization": f"Bearer {ALICE}"}, timeout=30
    ) as http:
        turn = (await http.get(f"/v1/agents/gatekeeper/conversations/{cid}/turns/{done.id}")).json()
    (call,) = [p for p in turn["message"]["parts"] if p["type"] == "tool-delete_file"]
    assert call["state"] == "output-denied"
    assert call["approval"] == {
        "id": call["approval"]["id"],
        "approved": False,
        "reason": "keep it",
    }


def test_the_documented_client_works(tenants: str) -> None:
    """docs/protocols.md's A2A example, as written but for the gateway's address and key."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocols.md").read_text()
    section = doc.split("\n## A2A\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "http://localhost:8000/a2a/assistant" in code and "Bearer my-key" in code
    code = code.replace("http://localhost:8000/a2a/assistant", f"{tenants}/a2a/helper")
    code = code.replace("Bearer my-key", f"Bearer {ALICE}")
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "TASK_STATE_COMPLETED" in ran.stdout and "echo:" in ran.stdout, ran.stdout


CAROL = f"carol-{uuid.uuid4().hex[:8]}"
"""A tenant of this module alone: its stream limit is not shared with other tests'."""


@pytest.fixture(scope="module")
def capped(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second gateway on the same services and workers: alice's key and carol's, and one
    open stream per tenant (THINK_MAX_STREAMS_PER_TENANT=1). Its URL."""
    env = {
        **stack.env,
        "THINK_API_KEYS": f"alice-key:alice,carol-key:{CAROL}",
        "THINK_MAX_STREAMS_PER_TENANT": "1",
    }
    with extra_gateway(env, tmp_path_factory.mktemp("a2a-capped")) as url:
        yield url


async def until_a_slot(
    open_stream: Callable[[], AsyncIterator[StreamResponse]],
) -> list[StreamResponse]:
    """A stream's events, once the tenant has a stream slot free: a stream's slot is given
    back once its response has ended (the server notices a moment after the client has read
    the end, or dropped it). A refused stream admits nothing, so trying again is safe."""
    for _ in range(100):
        try:
            return [e async for e in open_stream()]
        except InvalidRequestError as refused:
            assert "too many open streams" in refused.message
            await asyncio.sleep(0.1)
    raise AssertionError("no stream slot came free in 10 s")


async def test_a_task_resubscribes_on_another_gateway(
    tenants: str, capped: str, fake_model: FakeOpenAIServer
) -> None:
    """Nothing of a task lives in a gateway: a stream dropped on one resumes on another."""
    cid = await new_context(tenants, "helper")
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))
    async with a2a(tenants, "helper", ALICE, streaming=True) as here:
        seen: list[StreamResponse] = []
        stream = generator(here.send_message(message("talk", context_id=cid)))
        async for event in stream:
            seen.append(event)
            if len([e for e in seen if e.HasField("artifact_update")]) >= 5:
                break
        await stream.aclose()
    task_id = seen[0].task.id
    async with a2a(capped, "helper", ALICE, streaming=True) as there:
        rest = await until_a_slot(lambda: there.subscribe(SubscribeToTaskRequest(id=task_id)))
    assert streamed_text(rest) == "".join(WORDS)
    assert last_state(rest) == TaskState.TASK_STATE_COMPLETED


async def test_streams_count_against_the_tenants_limit(
    capped: str, fake_model: FakeOpenAIServer
) -> None:
    """THINK_MAX_STREAMS_PER_TENANT holds for A2A's streams as for `/v1`'s, and a stream's
    slot is given back when it ends."""
    cid = await new_context(capped, "helper", "carol-key")
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))
    async with (
        a2a(capped, "helper", "carol-key", streaming=True) as first,
        a2a(capped, "helper", "carol-key", streaming=True) as second,
    ):
        events = []
        async for event in first.send_message(message("long", context_id=cid)):
            events.append(event)
            if len(events) == 2:  # the first stream is open: no second one
                with pytest.raises(InvalidRequestError, match="too many open streams"):
                    _ = [e async for e in second.send_message(message("more"))]
        assert last_state(events) == TaskState.TASK_STATE_COMPLETED
        more = message("more", context_id=cid)
        again = await until_a_slot(lambda: second.send_message(more))
    assert last_state(again) == TaskState.TASK_STATE_COMPLETED
