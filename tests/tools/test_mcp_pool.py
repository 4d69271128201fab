"""MCP pieces without the stack: `McpServer`'s checks, `McpTool`'s schema validation and
approval, and this process's connection pool against the real stdio server of
tests/mcp_notes_server.py (the tool list refreshed after `refresh_seconds`, secrets from the
environment by name, a server nobody listens for)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult, ImageContent, TextContent

from tests._stack import free_port
from tests._waits import eventually, now
from think import McpServer, ToolError, UserError
from think.tools import McpTool, McpToolInfo, McpUnavailable, mcp_tools_of
from think.tools._mcp_pool import close_pool, pool, tool_output

NOTES = str(Path(__file__).parents[1] / "mcp_notes_server.py")


def notes(**options: Any) -> McpServer:
    return McpServer.stdio("notes", command=sys.executable, args=[NOTES], **options)


@pytest.fixture(autouse=True)
async def closed_pool() -> AsyncIterator[None]:
    yield
    await close_pool()


# -- McpServer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "says"),
    [
        pytest.param(lambda: McpServer.stdio("a_b", command="x"), "must be 1 to 32", id="name"),
        pytest.param(lambda: McpServer.stdio("x", command=""), "needs a command", id="command"),
        pytest.param(lambda: McpServer.http("x", url="ftp://h/mcp"), "http(s) url", id="url"),
        pytest.param(
            lambda: McpServer.http("x", url="http://h/mcp", headers_from_env={"a": "Bearer x"}),
            "name of an environment variable",
            id="secret-for-a-name",
        ),
        pytest.param(
            lambda: McpServer.http("x", url="http://h/mcp", timeout_seconds=0),
            "timeout_seconds",
            id="timeout",
        ),
    ],
)
def test_a_bad_server_description_is_a_user_error_naming_it(build: Any, says: str) -> None:
    with pytest.raises(UserError, match=r"McpServer '(x|a_b)'") as caught:
        build()
    assert says in str(caught.value)


def test_a_stored_server_carries_no_secret_in_clear() -> None:
    McpServer.http(
        "x", url="http://h/mcp", headers_from_env={"authorization": "X_AUTH"}
    ).check_storable()
    with pytest.raises(UserError, match="headers_from_env"):
        McpServer.http("x", url="http://h/mcp", headers={"authorization": "t"}).check_storable()
    with pytest.raises(UserError, match="env_from"):
        McpServer.stdio("x", command="srv", env={"TOKEN": "t"}).check_storable()


# -- McpTool -----------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


def weather(server: McpServer | None = None, schema: dict[str, Any] = SCHEMA) -> McpTool:
    info = McpToolInfo(
        server="wx", name="forecast", description=" The forecast. ", input_schema=schema
    )
    return McpTool(server or McpServer.http("wx", url="http://127.0.0.1:1/mcp"), info)


def test_an_mcp_tool_is_named_by_its_server_and_keeps_its_schema() -> None:
    tool = weather()
    assert tool.name == "wx_forecast"
    assert tool.spec.name == "wx_forecast"
    assert tool.spec.description == "The forecast."
    assert tool.spec.parameters == SCHEMA


def test_arguments_are_checked_against_the_servers_schema() -> None:
    tool = weather()
    assert tool.validate({"city": "Oslo", "days": 2}) == {"city": "Oslo", "days": 2}
    with pytest.raises(ToolError) as caught:
        tool.validate({"days": 0})
    message = str(caught.value)
    assert message.startswith("invalid arguments for tool 'wx_forecast': ")
    assert "'city' is a required property" in message
    assert "days: 0 is less than the minimum of 1" in message


def test_a_server_schema_that_is_no_schema_fails_the_call_not_the_turn() -> None:
    tool = weather(schema={"type": "object", "properties": {"x": {"type": "nonsense"}}})
    with pytest.raises(ToolError, match="invalid input schema"):
        tool.validate({"x": 1})


def test_approval_is_per_server_or_per_tool() -> None:
    url = "http://127.0.0.1:1/mcp"
    assert weather(McpServer.http("wx", url=url, needs_approval=True)).may_need_approval
    assert weather(McpServer.http("wx", url=url, needs_approval=("forecast",))).may_need_approval
    assert not weather(McpServer.http("wx", url=url, needs_approval=("other",))).may_need_approval
    assert not weather(McpServer.http("wx", url=url)).may_need_approval


def test_a_call_result_becomes_what_the_model_reads() -> None:
    plain = CallToolResult(content=[TextContent(type="text", text="hi")])
    assert tool_output("s", "t", plain) == "hi"
    structured = CallToolResult(
        content=[TextContent(type="text", text="3")], structured_content={"result": 3}
    )
    assert tool_output("s", "t", structured) == {"result": 3}
    image = CallToolResult(content=[ImageContent(type="image", data="AAAA", mime_type="image/png")])
    [block] = tool_output("s", "t", image)
    assert block["type"] == "image" and block["data"] == "AAAA"
    failed = CallToolResult(content=[TextContent(type="text", text="no such city")], is_error=True)
    with pytest.raises(ToolError, match=r"^no such city$"):
        tool_output("s", "t", failed)


# -- the pool, against a real stdio server -------------------------------------------------


async def test_the_tool_list_is_fetched_again_after_refresh_seconds() -> None:
    quick, slow = notes(refresh_seconds=0.3), notes(refresh_seconds=3600, timeout_seconds=30)

    async def grown_quietly(server: McpServer) -> None:
        assert "whisper" not in {t.name for t in await pool().tools(server, wait=True) or []}
        assert await pool().call(server, "grow_quietly", {}) == {"result": "grown"}

    await asyncio.gather(grown_quietly(quick), grown_quietly(slow))  # the two start together

    async def refreshed() -> bool:  # once refresh_seconds have passed
        return "whisper" in {t.name for t in await pool().tools(quick, wait=True) or []}

    await eventually(refreshed, within=10, every=0.05)
    # No change announced, and not due: the list stays as it was.
    assert "whisper" not in {t.name for t in await pool().tools(slow, wait=True) or []}


async def test_one_connection_serves_concurrent_calls() -> None:
    server = notes()
    pids = await asyncio.gather(*(pool().call(server, "pid", {}) for _ in range(5)))
    assert len({p["result"] for p in pids}) == 1


async def test_secrets_reach_the_server_from_the_environment_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("THINK_TEST_MCP_TAG", "tag-from-the-environment")
    server = notes(env_from={"NOTES_TAG": "THINK_TEST_MCP_TAG"})
    assert await pool().call(server, "env", {"name": "NOTES_TAG"}) == {
        "result": "tag-from-the-environment"
    }
    missing = notes(env_from={"NOTES_TAG": "THINK_TEST_MCP_UNSET"})
    with pytest.raises(McpUnavailable, match="THINK_TEST_MCP_UNSET"):
        await pool().call(missing, "env", {"name": "NOTES_TAG"})


async def test_a_server_nobody_listens_for_is_unavailable_not_hung() -> None:
    server = McpServer.http("gone", url=f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(McpUnavailable, match="'gone' is unreachable"):
        await pool().call(server, "anything", {})
    assert await pool().tools(server, wait=True) is None  # never reached: no tools


def test_names_models_do_not_accept_are_cleaned_or_left_out() -> None:
    server = McpServer.http("wx", url="http://127.0.0.1:1/mcp")
    infos = [
        McpToolInfo(server="wx", name="files.read"),
        McpToolInfo(server="wx", name="files/read"),  # the same once cleaned: left out
        McpToolInfo(server="wx", name="x" * 70),  # too long: left out
    ]
    [tool] = mcp_tools_of(server, infos)
    assert tool.name == "wx_files_read"
    assert tool.info.name == "files.read"  # what the server is called with


async def test_an_idle_connection_is_closed_and_its_list_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import think.tools._mcp_pool as mcp_pool

    idle, busy = notes(), notes(timeout_seconds=30)
    first, _ = await asyncio.gather(  # the two start together
        pool().call(idle, "pid", {}), pool().call(busy, "pid", {})
    )
    monkeypatch.setattr(mcp_pool, "IDLE_SECONDS", 0.2)

    async def idle_closed() -> bool:
        await pool().call(busy, "pid", {})  # any use of the pool closes what sat idle
        return not pool().connection(idle).alive

    await eventually(idle_closed, within=10, every=0.05)
    monkeypatch.setattr(mcp_pool, "IDLE_SECONDS", 3600)
    connection = pool().connection(idle)
    assert not connection.alive
    assert "remember" in {t.name for t in connection.tools or []}  # still known, for no-wait turns
    again = await pool().call(idle, "pid", {})
    assert again["result"] != first["result"]  # a new child


async def test_a_stdio_server_gets_none_of_the_workers_other_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("THINK_TEST_WORKER_SECRET", "the worker's own")
    server = notes(env={"NOTES_MODE": "plain"})
    assert await pool().call(server, "env", {"name": "THINK_TEST_WORKER_SECRET"}) == {
        "result": None
    }
    assert await pool().call(server, "env", {"name": "NOTES_MODE"}) == {"result": "plain"}
    assert (await pool().call(server, "env", {"name": "PATH"}))["result"]


async def test_an_older_protocol_gets_list_changes_as_notifications_and_restarts() -> None:
    server = notes(protocol="legacy")
    assert "shout" not in {t.name for t in await pool().tools(server, wait=True) or []}
    assert await pool().call(server, "grow", {}) == {"result": "grown"}
    # notifications/tools/list_changed, unasked: there is no subscription on this protocol.
    await eventually(lambda: now(pool().connection(server).stale), within=5, every=0.05)
    assert "shout" in {t.name for t in await pool().tools(server, wait=True) or []}

    pid = (await pool().call(server, "pid", {}))["result"]
    os.kill(pid, signal.SIGKILL)
    # Until the session has read the child's EOF (no subscription to lose on this protocol):
    # from then on the dead connection is not lent again.
    await eventually(lambda: now(not pool().connection(server).alive), within=10, every=0.05)
    assert (await pool().call(server, "pid", {}))["result"] != pid
