"""Agents the test suite hosts. Their model is the scripted fake server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from think import (
    ChatRecovery,
    ChatRecoveryContext,
    ChatRecoveryOptions,
    Think,
    Tool,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResultContext,
    ToolContext,
    events,
    tool,
)


@tool
async def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 21}


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def slow(seconds: float) -> str:
    """Take a while."""
    await asyncio.sleep(seconds)
    return "done"


@tool
def record(note: str, ctx: ToolContext) -> str:
    """Append a note to the file named by THINK_TEST_TOOL_LOG: a side effect tests can count."""
    path = os.environ.get("THINK_TEST_TOOL_LOG")
    if path:
        with Path(path).open("a") as log:
            log.write(f"{note} {ctx.idempotency_key}\n")
    return f"recorded {note}"


class Helper(Think):
    """The agent most tests talk to."""

    name = "helper"
    max_steps = 4

    def get_model(self) -> str:
        return "scripted-model"

    def get_system_prompt(self) -> str:
        return "You are a test agent."

    def get_tools(self) -> list[Tool]:
        return [get_weather, add, explode, record, slow]


class Staller(Helper):
    """The helper agent with a short stall timeout and a small recovery budget."""

    name = "staller"
    chat_stream_stall_timeout = 1.0
    chat_recovery = ChatRecovery(max_attempts=2, terminal_message="Interrupted, sorry.")


class Persister(Staller):
    """Keeps a failed attempt's partial answer and continues from it."""

    name = "persister"

    def on_chat_recovery(self, ctx: ChatRecoveryContext) -> ChatRecoveryOptions:
        return ChatRecoveryOptions(persist=True)


class GiveUp(Staller):
    """Ends the turn at the first failure."""

    name = "give_up"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> ChatRecoveryOptions:
        return ChatRecoveryOptions.model_validate({"continue": False})


class Budgeted(Helper):
    """Tiny budgets: a turn may not start a second model step."""

    name = "budgeted"
    turn_budget_tokens = 1


class Hurried(Helper):
    """A turn may run for half a second before it stops asking the model."""

    name = "hurried"
    turn_budget_seconds = 0.5


@tool(needs_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file from the workspace."""
    return f"deleted {path}"


def _large(arguments: dict[str, object], ctx: ToolContext) -> bool:
    amount = arguments["amount"]
    return isinstance(amount, int) and amount > 100


@tool(needs_approval=_large)
async def transfer(amount: int) -> str:
    """Move money; amounts over 100 need a person's approval."""
    return f"moved {amount}"


@tool(needs_approval=True, approval_timeout=1.0)
async def launch(target: str) -> str:
    """Launch something; an unanswered request is denied after a second."""
    return f"launched {target}"


@tool(retries=2, retry_backoff=1.0)
async def flaky(key: str, ctx: ToolContext) -> str:
    """Fails on its first two attempts of each call, then succeeds."""
    path = Path(os.environ["THINK_HOME"]) / f"flaky-{ctx.turn_id}-{key}"
    tries = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(tries))
    if tries < 3:
        raise ConnectionError(f"try {tries} failed")
    return f"ok after {tries} tries"


@tool(timeout=0.5)
async def sluggish() -> str:
    """Always takes longer than its timeout."""
    await asyncio.sleep(5)
    return "never"


class Gatekeeper(Helper):
    """Tools that need a person's approval, and tools with execution policies."""

    name = "gatekeeper"

    def get_tools(self) -> list[Tool]:
        return [get_weather, slow, delete_file, transfer, launch, flaky, sluggish, add]


class Hooked(Helper):
    """Tool hooks: blocks `explode`, serves a cached weather, rewrites `add`, logs outcomes."""

    name = "hooked"

    def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
        if ctx.tool_name == "explode" and ctx.input.get("reason") == "forbidden":
            return ToolCallDecision.block("explode is disabled here")
        if ctx.tool_name == "get_weather" and ctx.input.get("city") == "Cache":
            return ToolCallDecision.substitute({"city": "Cache", "temp_c": -1, "cached": True})
        if ctx.tool_name == "add":
            return ToolCallDecision.allow(input={**ctx.input, "b": 1000})
        return None

    async def after_tool_call(self, ctx: ToolCallResultContext) -> None:
        line = ctx.model_dump_json(
            include={
                "conversation_id",
                "tool_name",
                "outcome",
                "success",
                "output",
                "error",
                "duration_ms",
            }
        )
        with (Path(os.environ["THINK_HOME"]) / "tool-hooks.log").open("a") as log:
            log.write(line + "\n")


def _record_event(event: events.ThinkEvent) -> None:
    """Every event the worker emits, as JSON lines under THINK_HOME: what tests assert on."""
    home = os.environ.get("THINK_HOME")
    if home:
        with (Path(home) / "events.log").open("a") as log:
            log.write(event.model_dump_json() + "\n")


events.subscribe(_record_event)
