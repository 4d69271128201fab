"""What the turn API and concurrency tests share: a slow scripted answer, waiting until a
turn visibly streams, and a transcript as (role, text) pairs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests._sse import deltas, read_until
from think import UIMessage
from think.testing import Reply, reply, text

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
