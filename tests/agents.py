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
    ToolContext,
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
