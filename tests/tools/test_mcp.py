"""MCP tools, against real MCP servers written with the SDK's server framework: `notes` over
stdio (tests/mcp_notes_server.py, started by the worker itself) and `calc` over streamable HTTP
on 127.0.0.1 (tests/mcp_calc_server.py, started here, killed and restarted by the tests).

What is proved: discovery (the model and `GET /v1/agents` see `<server>_<tool>` with the
server's schema), a call, a bad call (a tool error, checked against the schema before the
server sees it), a server that dies in the middle of a call (a tool error, the turn completes)
and comes back (the next turn reconnects by itself), a stdio server killed between turns
(restarted), a tool-list change, approval and `before_tool_call` on MCP tools, servers added
to one conversation (secrets by variable name only), and a server that never answers not
delaying a turn that does not wait for it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._sse import read_until
from tests._stack import free_port
from tests._turn_helpers import tool_part, wait_turn
from tests.agents import McpHidden, McpUser
from think import McpServer, ThinkService, UserError
from think.testing import FakeOpenAIServer, text, tool_call
from think.tools import close_mcp_pool

AGENT = "mcp_user"
CALC = Path(__file__).parents[1] / "mcp_calc_server.py"


class CalcServer:
    """tests/mcp_calc_server.py on a port of 127.0.0.1, as a process of its own."""

    def __init__(self, logs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.logs / f"calc-{self.port}.log").open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(CALC), str(self.port)], stdout=log, stderr=log
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the calc server exited as it started"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("the calc server did not listen within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None


@pytest.fixture
def calc(tmp_path: Path) -> Iterator[CalcServer]:
    server = CalcServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def tool_names(fake_model: FakeOpenAIServer, cid: str, call: int) -> list[str]:
    body = fake_model.requests(cid)[call]["body"]
    return [t["function"]["name"] for t in body.get("tools", [])]


def tool_schema(fake_model: FakeOpenAIServer, cid: str, call: int, name: str) -> dict[str, Any]:
    body = fake_model.requests(cid)[call]["body"]
    found: dict[str, Any] = next(
        t["function"]["parameters"] for t in body["tools"] if t["function"]["name"] == name
    )
    return found


async def test_the_agents_listing_names_mcp_tools_by_server(api: httpx.AsyncClient) -> None:
    agents = {a["name"]: a for a in (await api.get("/v1/agents")).json()["agents"]}
    tools = {t["name"]: t for t in agents[AGENT]["tools"]}
    assert {"add", "notes_remember", "notes_recall", "notes_pid", "notes_erase"} <= set(tools)
    assert tools["notes_remember"]["description"] == "Keep a note."
    assert tools["notes_erase"]["needs_approval"] is True  # per tool, from the server's config
    assert tools["notes_remember"]["needs_approval"] is False


async def test_a_stdio_tool_is_discovered_and_called(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("notes_remember", {"text": "buy milk"}, id="c1"),
        tool_call("notes_recall", {}, id="c2"),
        text("Noted."),
    )
    turn = await wait_turn(api, AGENT, cid, "remember milk", status="completed")
    names = tool_names(fake_model, cid, 0)
    assert {"add", "notes_remember", "notes_recall", "notes_grow"} <= set(names)
    # The server's own JSON Schema, as it listed it.
    schema = tool_schema(fake_model, cid, 0, "notes_remember")
    assert schema["properties"]["text"]["type"] == "string"
    assert schema["required"] == ["text"]
    assert "noted #" in str(tool_part(turn, "c1")["output"])
    assert "buy milk" in str(tool_part(turn, "c2")["output"])
    assert tool_part(turn, "c2")["state"] == "output-available"


async def test_a_bad_call_goes_back_to_the_model_as_a_tool_error(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    marker = f"never-{cid}"
    fake_model.script(
        cid,
        tool_call("notes_remember", {"text": 42, "extra": marker}, id="c1"),
        tool_call("notes_recall", {}, id="c2"),
        text("Sorry."),
    )
    turn = await wait_turn(api, AGENT, cid, "remember 42", status="completed")
    bad = tool_part(turn, "c1")
    assert bad["state"] == "output-error"
    assert "invalid arguments for tool 'notes_remember'" in bad["errorText"]
    assert "text: 42 is not of type 'string'" in bad["errorText"]
    # Checked before the call: the server never kept it.
    assert marker not in str(tool_part(turn, "c2")["output"])
    assert "42" not in str(tool_part(turn, "c2")["output"])


async def test_before_tool_call_applies_to_mcp_tools(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("notes_remember", {"text": f"password {cid}"}, id="c1"),
        tool_call("notes_recall", {}, id="c2"),
        text("No."),
    )
    turn = await wait_turn(api, AGENT, cid, "keep my password", status="completed")
    assert tool_part(turn, "c1")["output"] == "no passwords in notes"
    assert cid not in str(tool_part(turn, "c2")["output"])


async def test_approval_gates_an_mcp_tool(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("notes_erase", {}, id="c1"), text("Erased."))
    turn = await wait_turn(api, AGENT, cid, "erase everything", status="awaiting_approval")
    [pending] = turn["pending_approvals"]
    assert pending["tool_name"] == "notes_erase"
    assert fake_model.calls(cid) == 1
    url = f"{turn['status_url']}/approvals/{pending['approval_id']}"
    assert (await api.post(url, json={"approved": True})).status_code in (200, 202)
    for _ in range(300):
        done = (await api.get(turn["status_url"])).json()
        if done["status"] == "completed":
            break
        await asyncio.sleep(0.1)
    assert done["status"] == "completed", done
    assert "erased" in str(tool_part(done, "c1")["output"])


async def test_an_http_server_that_dies_mid_call_fails_the_call_and_is_reconnected(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    calc: CalcServer,
    cid: str,
) -> None:
    await service.conversation(McpUser, cid).configure({"calc_url": calc.url})
    fake_model.script(cid, tool_call("calc_add", {"a": 2, "b": 3}, id="c1"), text("5."))
    first = await wait_turn(api, AGENT, cid, "2+3", status="completed")
    assert "calc_add" in tool_names(fake_model, cid, 0)
    assert tool_part(first, "c1")["output"] == {"result": 5}

    # The server exits in the middle of a call: a tool error, and the turn goes on.
    fake_model.script(cid, tool_call("calc_crash", {}, id="c2"), text("It crashed."))
    second = await wait_turn(api, AGENT, cid, "crash", status="completed")
    assert calc.exited()
    crashed = tool_part(second, "c2")
    assert crashed["state"] == "output-error"
    assert "calc" in crashed["errorText"]
    assert fake_model.calls(cid) == 4  # the model was told, and answered

    # While it is down its tools (known from the last connection) fail as tool errors.
    fake_model.script(cid, tool_call("calc_add", {"a": 1, "b": 1}, id="c3"), text("Down."))
    third = await wait_turn(api, AGENT, cid, "1+1", status="completed")
    assert tool_part(third, "c3")["state"] == "output-error"
    assert "unreachable" in tool_part(third, "c3")["errorText"]

    # Back on the same port: the next call reconnects by itself.
    calc.start()
    fake_model.script(cid, tool_call("calc_add", {"a": 20, "b": 22}, id="c4"), text("42."))
    fourth = await wait_turn(api, AGENT, cid, "20+22", status="completed")
    assert tool_part(fourth, "c4")["output"] == {"result": 42}


async def test_a_killed_stdio_server_is_started_again(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("notes_pid", {}, id="c1"), text("Got it."))
    first = await wait_turn(api, AGENT, cid, "pid?", status="completed")
    pid = int(tool_part(first, "c1")["output"]["result"])
    os.kill(pid, signal.SIGKILL)
    # Until the worker has seen it die (it reaps its child then). A call already on its way
    # to a server that dies fails as a tool error instead, as the crash test shows.
    for _ in range(300):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the worker never reaped its killed notes server {pid}")

    fake_model.script(cid, tool_call("notes_pid", {}, id="c2"), text("Again."))
    second = await wait_turn(api, AGENT, cid, "pid again?", status="completed")
    part = tool_part(second, "c2")
    assert part["state"] == "output-available", part
    assert int(part["output"]["result"]) != pid


async def test_a_changed_tool_list_reaches_the_next_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    # `grow` adds `shout` to the server and says so; the worker lists the tools again.
    fake_model.script(cid, tool_call("notes_grow", {}, id="c1"), text("Grown."))
    await wait_turn(api, AGENT, cid, "grow", status="completed")
    fake_model.script(cid, tool_call("notes_shout", {"text": "hey"}, id="c2"), text("HEY."))
    turn = await wait_turn(api, AGENT, cid, "shout hey", status="completed")
    assert "notes_shout" in tool_names(fake_model, cid, 2)
    assert tool_part(turn, "c2")["output"] == {"result": "HEY"}


async def test_a_turn_uses_the_tool_list_it_recorded(
    api: httpx.AsyncClient, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("notes_recall", {}, id="c1"), text("Here."))
    turn = await wait_turn(api, AGENT, cid, "recall", status="completed")
    async with engine.connect() as conn:
        config = (
            await conn.execute(
                sql("SELECT config FROM turns WHERE id = :id"), {"id": turn["turn_id"]}
            )
        ).scalar_one()
    record = config["mcp"]
    assert record["servers"]["notes"] == {"source": "agent"}  # by name: nothing of it stored
    assert {"recall", "remember"} <= {t["name"] for t in record["tools"] if t["server"] == "notes"}


async def test_a_server_added_to_a_conversation_joins_its_turns(
    api: httpx.AsyncClient,
    service: ThinkService,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    calc: CalcServer,
    cid: str,
) -> None:
    conv = service.conversation(McpUser, cid)
    with pytest.raises(UserError, match="headers_from_env"):
        await conv.add_mcp_server(
            McpServer.http("crm", url=calc.url, headers={"authorization": "Bearer clear"})
        )
    with pytest.raises(UserError, match="declares an MCP server named 'notes'"):
        await conv.add_mcp_server(McpServer.http("notes", url=calc.url))
    await conv.add_mcp_server(
        McpServer.http("crm", url=calc.url, headers_from_env={"authorization": "MCP_TEST_AUTH"})
    )
    assert [s.name for s in await conv.mcp_servers()] == ["crm"]
    fake_model.script(cid, tool_call("crm_whoami", {}, id="c1"), text("You."))
    turn = await wait_turn(api, AGENT, cid, "who am I?", status="completed")
    assert "crm_add" in tool_names(fake_model, cid, 0)
    # The worker read the secret from its environment; the database holds only its name.
    assert tool_part(turn, "c1")["output"] == {"result": "Bearer mcp-test-secret"}
    async with engine.connect() as conn:
        stored = (
            (await conn.execute(sql("SELECT spec::text FROM conversation_mcp_servers")))
            .scalars()
            .all()
        )
        turn_config = (
            await conn.execute(
                sql("SELECT config::text FROM turns WHERE id = :id"), {"id": turn["turn_id"]}
            )
        ).scalar_one()
    assert not any("mcp-test-secret" in s for s in stored)
    assert "mcp-test-secret" not in turn_config

    # Another conversation of the agent does not have it.
    other = f"{cid}-other"
    fake_model.script(other, text("Hi."))
    await wait_turn(api, AGENT, other, "hi", status="completed")
    assert "crm_add" not in tool_names(fake_model, other, 0)

    assert await conv.remove_mcp_server("crm") is True
    fake_model.script(cid, text("Gone."))
    await wait_turn(api, AGENT, cid, "and now?", status="completed")
    assert "crm_add" not in tool_names(fake_model, cid, 2)


async def test_a_server_that_never_answers_does_not_delay_the_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello without it."))
    turn = await wait_turn(api, "mcp_impatient", cid, "hi", status="completed")
    assert not any(n.startswith("mute_") for n in tool_names(fake_model, cid, 0))
    assert "get_weather" in tool_names(fake_model, cid, 0)
    assert turn["message"]["parts"][-1]["text"] == "Hello without it."


async def test_active_tools_narrow_mcp_tools_too(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Only recall."))
    await wait_turn(
        api, AGENT, cid, "hi", status="completed", body={"only_tools": ["notes_recall"]}
    )
    assert tool_names(fake_model, cid, 0) == ["notes_recall"]


async def test_a_slow_call_times_out_as_a_tool_error_and_the_connection_stays(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    calc: CalcServer,
    cid: str,
) -> None:
    await service.conversation(McpUser, cid).configure({"calc_url": calc.url, "calc_timeout": 1})
    fake_model.script(
        cid,
        tool_call("calc_sleep", {"seconds": 30}, id="c1"),
        tool_call("calc_add", {"a": 1, "b": 2}, id="c2"),
        text("Done."),
    )
    turn = await wait_turn(api, AGENT, cid, "sleep", status="completed")
    assert tool_part(turn, "c1")["state"] == "output-error"
    assert "did not answer within 1 s" in tool_part(turn, "c1")["errorText"]
    assert tool_part(turn, "c2")["output"] == {"result": 3}


async def test_a_call_to_a_down_server_is_retried_as_its_server_says(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    calc: CalcServer,
    cid: str,
) -> None:
    await service.conversation(McpUser, cid).configure({"calc_url": calc.url, "calc_retries": 30})
    fake_model.script(cid, tool_call("calc_add", {"a": 1, "b": 1}, id="c1"), text("Up."))
    await wait_turn(api, AGENT, cid, "1+1", status="completed")
    calc.stop()
    # The call finds the server down and retries (a second apart) until it is back.
    fake_model.script(cid, tool_call("calc_add", {"a": 2, "b": 2}, id="c2"), text("Back."))
    turn = (
        await api.post(f"/v1/agents/{AGENT}/conversations/{cid}/turns", json={"input": "2+2"})
    ).json()
    await asyncio.sleep(1.5)
    calc.start()
    for _ in range(600):
        done = (await api.get(turn["status_url"])).json()
        if done["status"] == "completed":
            break
        await asyncio.sleep(0.1)
    assert done["status"] == "completed", done
    assert tool_part(done, "c2")["output"] == {"result": 4}


async def test_a_cancel_reaches_a_running_mcp_call(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    calc: CalcServer,
    cid: str,
) -> None:
    await service.conversation(McpUser, cid).configure({"calc_url": calc.url, "calc_timeout": 60})
    fake_model.script(cid, tool_call("calc_sleep", {"seconds": 60}, id="c1"))
    turn = (
        await api.post(f"/v1/agents/{AGENT}/conversations/{cid}/turns", json={"input": "sleep"})
    ).json()
    # Once the model has asked for the tool and the call is with the server.
    await read_until(
        api, turn["stream_url"], lambda got: any(c["type"] == "tool-input-available" for c in got)
    )
    await asyncio.sleep(0.5)
    assert (await api.post(f"{turn['status_url']}/cancel")).status_code == 202
    for _ in range(300):
        done = (await api.get(turn["status_url"])).json()
        if done["status"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.1)
    assert done["status"] == "aborted", done
    # The connection is still good for the next turn.
    fake_model.script(cid, tool_call("calc_add", {"a": 3, "b": 4}, id="c2"), text("7."))
    after = await wait_turn(api, AGENT, cid, "3+4", status="completed")
    assert tool_part(after, "c2")["output"] == {"result": 7}


async def test_include_mcp_tools_false_keeps_them_from_the_model(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Only add."))
    await wait_turn(api, "mcp_hidden", cid, "hi", status="completed")
    assert tool_names(fake_model, cid, 0) == ["add"]
    agents = {a["name"]: a for a in (await api.get("/v1/agents")).json()["agents"]}
    assert [t["name"] for t in agents["mcp_hidden"]["tools"]] == ["add"]
    # An explicit call still lists them (connecting from this process).
    try:
        assert "notes_recall" in {t.name for t in await McpHidden().mcp_tools()}
    finally:
        await close_mcp_pool()
