"""What the test worker logged: the events and hook calls that tests/agents.py writes as JSON
lines under THINK_HOME, read back (waiting a little, as the worker writes them as it goes)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests._stack import Stack
from think.events import ThinkEvent, ThinkEventTypeAdapter


async def emitted(stack: Stack, cid: str, last: str, within: float = 10) -> list[ThinkEvent]:
    """The conversation's events, once one of type `last` has arrived."""
    path = stack.logs / "events.log"
    deadline = asyncio.get_running_loop().time() + within
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [ThinkEventTypeAdapter.validate_json(line) for line in lines]
        mine = [e for e in found if e.conversation_id == cid]
        if any(e.type == last for e in mine) or asyncio.get_running_loop().time() > deadline:
            return mine
        await asyncio.sleep(0.1)


async def hook_calls(
    stack: Stack, cid: str, hook: str, *, at_least: int = 1, within: float = 10
) -> list[dict[str, Any]]:
    path = stack.logs / "turn-hooks.log"
    deadline = asyncio.get_running_loop().time() + within
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [
            e
            for e in map(json.loads, lines)
            if e["hook"] == hook
            and cid in (e.get("conversation_id"), e.get("ctx", {}).get("conversation_id"))
        ]
        if len(found) >= at_least or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)
