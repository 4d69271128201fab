"""`/mcp`: every hosted agent as an MCP tool, driven by the official `mcp` SDK's own client
over streamable HTTP against the real gateway (two tenants' keys: the `tenants` fixture).

Both eras: the default client negotiates 2026-07-28 (per-request envelope, `InputRequiredResult`
for approvals, the Tasks extension), `mode="legacy"` the 2025-11-25 handshake (a session,
`elicitation/create` on the call's stream)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitResult,
    Request,
    RequestParams,
    Result,
)
from pydantic import Field, TypeAdapter

from api.app import create_app
from tests._stack import ROOT, bearer_client
from think.server import Settings
from think.testing import FakeOpenAIServer, text, tool_call

TASKS = "io.modelcontextprotocol/tasks"
ALICE, BOB = "alice-key", "bob-key"
ANY = TypeAdapter(dict[str, Any])


class TaskId(RequestParams):
    task_id: str = Field(alias="taskId")


class TasksGet(Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskId
    name_param = "taskId"


class TasksCancel(Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskId
    name_param = "taskId"


class CreatedTask(Result):
    """The extension's `CreateTaskResult`, as this client claims it."""

    result_type: Literal["task"] = "task"
    task_id: str = Field(alias="taskId")
    status: str


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(TasksGet(params=TaskId(taskId=task_id)), ANY)


async def task_until(client: Client, task_id: str, *statuses: str) -> dict[str, Any]:
    """The task once its status is one of `statuses` (polled, as the extension says)."""
    with anyio.fail_after(30):
        while True:
            task = await get_task(client, task_id)
            if task["status"] in statuses:
                return task
            await anyio.sleep(0.1)


async def follow_task(created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    """Poll `tasks/get` until the task ends; its result is the call's."""
    request = TasksGet(params=TaskId(taskId=created.task_id))
    while True:
        task = await ctx.session.send_request(request, ANY)
        if task["status"] == "completed":
            return CallToolResult.model_validate(task["result"], by_name=False)
        assert task["status"] in ("working", "input_required"), task
        await anyio.sleep(task.get("pollIntervalMs", 200) / 1000)


class Tasks(ClientExtension):
    """The Tasks extension, client side: a task result is followed to its end."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=follow_task)]


@asynccontextmanager
async def mcp_client(
    url: str, key: str | None = ALICE, extra_headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers.update(extra_headers or {})
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, **options) as client:
            yield client


def conversation_of(result: CallToolResult) -> str:
    assert result.meta is not None, result
    cid: str = result.meta["io.think/conversation_id"]
    return cid


def approving(
    seen: list[str], approved: bool = True
) -> Callable[[Any, ElicitRequestParams], Awaitable[ElicitResult]]:
    async def answer(_ctx: Any, params: ElicitRequestParams) -> ElicitResult:
        seen.append(params.message)
        return ElicitResult(action="accept", content={"approved": approved})

    return answer


async def test_lists_every_agent_as_a_tool(tenants: str) -> None:
    async with mcp_client(tenants) as client:
        assert client.protocol_version == "2026-07-28"
        assert TASKS in (client.server_capabilities.extensions or {})
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    async with bearer_client(tenants, ALICE) as api:
        agents = {a["name"]: a for a in (await api.get("/v1/agents")).json()["agents"]}
    assert set(listed) == set(agents)
    helper = listed["helper"]
    assert helper.description == agents["helper"]["description"]
    schema = helper.input_schema
    assert schema["required"] == ["message"]
    assert set(schema["properties"]) == {"message", "conversation_id"}


async def test_calls_an_agent_and_continues_its_conversation(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with mcp_client(tenants) as client:
        first = await client.call_tool(
            "helper", {"message": "hello there"}, progress_callback=on_progress
        )
        assert not first.is_error, first
        assert first.content[0].text == "echo: hello there"  # type: ignore[union-attr]
        assert progress and progress[-1][1] == "step done"
        cid = conversation_of(first)
        fake_model.script(cid, text("We spoke before."))
        second = await client.call_tool("helper", {"message": "again?", "conversation_id": cid})
        assert second.content[0].text == "We spoke before."  # type: ignore[union-attr]
        assert conversation_of(second) == cid
    async with bearer_client(tenants, ALICE) as api:
        turns = (await api.get(f"/v1/agents/helper/conversations/{cid}/turns")).json()["turns"]
    assert [t["status"] for t in turns] == ["completed", "completed"]


async def test_an_older_revision_client_works_too(tenants: str) -> None:
    async with mcp_client(tenants, mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert "helper" in {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("helper", {"message": "from 2025"})
        assert result.content[0].text == "echo: from 2025"  # type: ignore[union-attr]


async def _approve_through(
    tenants: str, fake_model: FakeOpenAIServer, **options: Any
) -> tuple[CallToolResult, list[str], str]:
    """Ask `gatekeeper` to delete a file (a tool that needs approval) in a conversation of
    its own, approving through the client's elicitation callback."""
    seen: list[str] = []
    async with mcp_client(tenants, elicitation_callback=approving(seen), **options) as client:
        cid = conversation_of(await client.call_tool("gatekeeper", {"message": "hi"}))
        fake_model.script(
            cid,
            text("Deleting.") + tool_call("delete_file", {"path": "/tmp/x"}, id="call_del"),
            text("Done, it is gone."),
        )
        result = await client.call_tool(
            "gatekeeper", {"message": "delete /tmp/x", "conversation_id": cid}
        )
    return result, seen, cid


async def _ran_once(tenants: str, cid: str) -> None:
    async with bearer_client(tenants, ALICE) as api:
        turns = (await api.get(f"/v1/agents/gatekeeper/conversations/{cid}/turns")).json()
    parts = [
        part
        for turn in turns["turns"]
        for part in (turn["message"] or {}).get("parts", [])
        if part.get("toolCallId") == "call_del"
    ]
    assert [p["state"] for p in parts] == ["output-available"], parts
    assert parts[0]["output"] == "deleted /tmp/x"


async def test_an_approval_is_asked_with_input_required(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    result, seen, cid = await _approve_through(tenants, fake_model)
    assert result.content[0].text == "Deleting.Done, it is gone."  # type: ignore[union-attr]
    assert len(seen) == 1 and "delete_file" in seen[0]
    await _ran_once(tenants, cid)


async def test_an_older_client_is_asked_with_elicitation(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    result, seen, cid = await _approve_through(tenants, fake_model, mode="legacy")
    assert result.content[0].text == "Deleting.Done, it is gone."  # type: ignore[union-attr]
    assert len(seen) == 1
    await _ran_once(tenants, cid)


async def test_a_task_is_followed_to_its_end(tenants: str, fake_model: FakeOpenAIServer) -> None:
    async with mcp_client(tenants, extensions=[Tasks()]) as client:
        result = await client.call_tool("helper", {"message": "as a task"})
        assert result.content[0].text == "echo: as a task"  # type: ignore[union-attr]
        cid = conversation_of(result)
        created = await client.session.call_tool(
            "helper", {"message": "and again", "conversation_id": cid}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask)
        assert created.task_id.startswith("turn_")
        async with bearer_client(tenants, ALICE) as api:
            turn = await api.get(f"/v1/agents/helper/conversations/{cid}/turns/{created.task_id}")
        assert turn.status_code == 200  # the task id is the turn's


async def test_a_task_is_cancelled(tenants: str, fake_model: FakeOpenAIServer) -> None:
    async with mcp_client(tenants, extensions=[Tasks()]) as client:
        cid = conversation_of(await client.call_tool("helper", {"message": "hi"}))
        fake_model.script(cid, tool_call("slow", {"seconds": 60}, id="call_slow"))
        created = await client.session.call_tool(
            "helper", {"message": "take your time", "conversation_id": cid}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask)
        await client.session.send_request(TasksCancel(params=TaskId(taskId=created.task_id)), ANY)
        task = await task_until(client, created.task_id, "cancelled", "completed")
        assert task["status"] == "cancelled", task


async def test_a_task_waiting_for_approval_is_input_required(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    seen: list[str] = []
    options: dict[str, Any] = {"extensions": [Tasks()], "elicitation_callback": approving(seen)}
    async with mcp_client(tenants, **options) as client:
        cid = conversation_of(await client.call_tool("gatekeeper", {"message": "hi"}))
        fake_model.script(
            cid,
            text("Deleting.") + tool_call("delete_file", {"path": "/tmp/x"}, id="call_del"),
            text("Done, it is gone."),
        )
        created = await client.session.call_tool(
            "gatekeeper", {"message": "delete it", "conversation_id": cid}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask)
        task = await task_until(client, created.task_id, "input_required", "completed")
        assert task["status"] == "input_required", task
        [(key, asked)] = task["inputRequests"].items()
        assert asked["method"] == "elicitation/create"
        update = {
            "taskId": created.task_id,
            "inputResponses": {key: {"action": "accept", "content": {"approved": True}}},
        }
        await client.session.send_request(TasksUpdate(params=Update.model_validate(update)), ANY)
        task = await task_until(client, created.task_id, "completed", "cancelled")
        assert task["result"]["content"][0]["text"] == "Deleting.Done, it is gone."
    await _ran_once(tenants, cid)


class Update(TaskId):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class TasksUpdate(Request[Update, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: Update
    name_param = "taskId"


async def test_bad_input_gets_the_protocols_own_errors(tenants: str) -> None:
    async with mcp_client(tenants) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no-such-agent", {"message": "hi"})
        assert unknown.value.error.code == -32602
        bad = await client.call_tool("helper", {"text": "hi"})
        assert bad.is_error
        assert "message" in bad.content[0].text  # type: ignore[union-attr]
        for unstorable in ("nul\x00", "   "):
            refused = await client.call_tool("helper", {"message": unstorable})
            assert refused.is_error, unstorable
            assert "invalid arguments: message" in refused.content[0].text  # type: ignore[union-attr]
    async with httpx.AsyncClient(base_url=tenants, timeout=30) as http:
        headers = {
            "Authorization": f"Bearer {ALICE}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
        }
        malformed = await http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1,', headers=headers)
        assert malformed.status_code < 500, malformed.text
        assert malformed.json()["error"]["code"] == -32700
        # An unpaired surrogate, which JSON can spell (the SDK's client cannot send it).
        call = (
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "helper", '
            '"arguments": {"message": "lone \\ud800"}, "_meta": {'
            '"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
            '"io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}, '
            '"io.modelcontextprotocol/clientCapabilities": {}}}}'
        )
        modern = {**headers, "Mcp-Method": "tools/call", "Mcp-Name": "helper"}
        lone = await http.post("/mcp", content=call.encode(), headers=modern)
        assert lone.status_code == 200, lone.text
        result = lone.json()["result"] if "json" in lone.headers["content-type"] else None
        assert result is not None, lone.text
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("invalid arguments: message")
        nobody = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert nobody.status_code == 401
        assert nobody.headers["www-authenticate"].startswith("Bearer")


async def test_another_tenants_conversation_and_task_reveal_nothing(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    async with mcp_client(tenants, ALICE, extensions=[Tasks()]) as alice:
        cid = conversation_of(await alice.call_tool("helper", {"message": "mine"}))
        fake_model.script(cid, tool_call("slow", {"seconds": 60}, id="call_slow"))
        created = await alice.session.call_tool(
            "helper", {"message": "slow", "conversation_id": cid}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask)
        try:
            async with mcp_client(tenants, BOB, extensions=[Tasks()]) as bob:
                errors: dict[str, MCPError] = {}
                for name, conversation in (("theirs", cid), ("none", "no-such-conversation")):
                    with pytest.raises(MCPError) as refused:
                        await bob.call_tool(
                            "helper", {"message": "x", "conversation_id": conversation}
                        )
                    errors[name] = refused.value
                assert errors["theirs"].error.code == errors["none"].error.code == -32602
                assert errors["theirs"].error.message.replace(cid, "?") == errors[
                    "none"
                ].error.message.replace("no-such-conversation", "?")
                for name, task_id in (
                    ("theirs", created.task_id),
                    ("none", "turn_0123456789abcdef"),
                ):
                    with pytest.raises(MCPError) as refused:
                        await get_task(bob, task_id)
                    errors[name] = refused.value
                    with pytest.raises(MCPError):
                        await bob.session.send_request(
                            TasksCancel(params=TaskId(taskId=task_id)), ANY
                        )
                assert errors["theirs"].error.code == errors["none"].error.code == -32602
                shown = {
                    e.error.message.replace(created.task_id, "?").replace(
                        "turn_0123456789abcdef", "?"
                    )
                    for e in errors.values()
                }
                assert len(shown) == 1, shown
            assert (await get_task(alice, created.task_id))["status"] == "working"
        finally:
            await alice.session.send_request(
                TasksCancel(params=TaskId(taskId=created.task_id)), ANY
            )
    assert json.dumps(errors["theirs"].error.model_dump()).find("mine") == -1


async def test_a_client_that_cannot_be_asked_is_told_what_the_turn_waits_for(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    async with mcp_client(tenants) as client:  # no elicitation callback: no capability
        cid = conversation_of(await client.call_tool("gatekeeper", {"message": "hi"}))
        fake_model.script(cid, tool_call("delete_file", {"path": "/tmp/y"}, id="call_del"))
        result = await client.call_tool("gatekeeper", {"message": "delete", "conversation_id": cid})
    assert result.is_error
    assert "waits for approvals" in result.content[0].text  # type: ignore[union-attr]
    assert result.meta is not None and result.meta["io.think/turn_id"].startswith("turn_")
    async with bearer_client(tenants, ALICE) as api:
        turn_id = result.meta["io.think/turn_id"]
        path = f"/v1/agents/gatekeeper/conversations/{cid}/turns/{turn_id}"
        assert (await api.get(path)).json()["status"] == "awaiting_approval"
        await api.post(f"{path}/cancel")


async def test_a_structured_output_is_structured_content(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    fake_model.script_default(text('{"severity": "high", "reason": "smoke"}'))
    async with mcp_client(tenants) as client:
        result = await client.call_tool("judge", {"message": "how bad is it?"})
    assert not result.is_error, result
    assert result.structured_content == {"severity": "high", "reason": "smoke"}


async def test_a_call_with_an_idempotency_key_is_the_same_turn(tenants: str) -> None:
    """A call repeated with its `Idempotency-Key` (a retry after a lost answer) is the same
    turn in the same new conversation: nothing runs twice."""
    retry = {"Idempotency-Key": f"mcp-{uuid.uuid4().hex}"}
    results = []
    for _ in range(2):
        async with mcp_client(tenants, extra_headers=retry) as client:
            results.append(await client.call_tool("helper", {"message": "only once"}))
    first, again = (r.meta or {} for r in results)
    assert first["io.think/turn_id"] == again["io.think/turn_id"]
    cid = first["io.think/conversation_id"]
    assert again["io.think/conversation_id"] == cid
    async with bearer_client(tenants, ALICE) as api:
        turns = (await api.get(f"/v1/agents/helper/conversations/{cid}/turns")).json()["turns"]
    assert len(turns) == 1


async def test_the_python_example_of_the_guide_runs(
    tenants: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/protocols.md's Python example, as written, against the test gateway."""
    guide = (ROOT / "docs" / "protocols.md").read_text()
    mcp_section = guide.split("## MCP", 1)[1]
    source = mcp_section.split("```python\n", 1)[1].split("```", 1)[0]
    source = source.replace("http://127.0.0.1:8000", tenants).replace("my-key", ALICE)
    assert source.rstrip().endswith("asyncio.run(main())")
    namespace: dict[str, Any] = {}
    exec(source.rstrip().removesuffix("asyncio.run(main())"), namespace)
    await namespace["main"]()
    printed = capsys.readouterr().out.splitlines()
    assert "'assistant'" in printed[0]
    assert printed[1].startswith("echo: Hello!")


async def test_a_browser_client_may_send_mcps_headers(settings: Settings) -> None:
    """With `THINK_CORS_ORIGINS`, a page's MCP client passes the preflight (the CORS
    middleware answers it before any route: no lifespan needed)."""
    app = create_app(settings.model_copy(update={"cors_origins": ["https://ide.example"]}))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway"
    ) as http:
        allowed = await http.options(
            "/mcp",
            headers={
                "Origin": "https://ide.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, mcp-session-id, "
                "mcp-protocol-version, mcp-method, mcp-name",
            },
        )
    assert allowed.status_code == 200, allowed.text
    assert "mcp-protocol-version" in allowed.headers["access-control-allow-headers"].lower()


async def test_a_2025_session_is_its_keys_alone(tenants: str) -> None:
    """Another key naming a session's id is told the session does not exist."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    async with httpx.AsyncClient(base_url=tenants, timeout=30) as http:
        opened = await http.post(
            "/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {ALICE}"}
        )
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        session_headers = {
            **headers,
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-11-25",
        }
        theirs = await http.post(
            "/mcp", json=listing, headers={**session_headers, "Authorization": f"Bearer {BOB}"}
        )
        unknown = await http.post(
            "/mcp",
            json=listing,
            headers={
                **session_headers,
                "Mcp-Session-Id": "0" * 32,
                "Authorization": f"Bearer {BOB}",
            },
        )
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.text == unknown.text
        await http.delete("/mcp", headers={**session_headers, "Authorization": f"Bearer {ALICE}"})


async def test_a_denied_approval_never_runs_the_tool(
    tenants: str, fake_model: FakeOpenAIServer
) -> None:
    seen: list[str] = []
    async with mcp_client(tenants, elicitation_callback=approving(seen, approved=False)) as client:
        cid = conversation_of(await client.call_tool("gatekeeper", {"message": "hi"}))
        fake_model.script(
            cid,
            tool_call("delete_file", {"path": "/tmp/z"}, id="call_del"),
            text("Left it alone."),
        )
        result = await client.call_tool("gatekeeper", {"message": "delete", "conversation_id": cid})
    assert result.content[0].text == "Left it alone."  # type: ignore[union-attr]
    assert len(seen) == 1
    async with bearer_client(tenants, ALICE) as api:
        turns = (await api.get(f"/v1/agents/gatekeeper/conversations/{cid}/turns")).json()
    states = [
        part["state"]
        for turn in turns["turns"]
        for part in (turn["message"] or {}).get("parts", [])
        if part.get("toolCallId") == "call_del"
    ]
    assert states == ["output-denied"]
