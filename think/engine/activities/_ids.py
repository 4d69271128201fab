"""The ids that name a turn, and a tool call of it, to agent code: the first fields of every
event (`think.events`), of every hook's context and of `ToolContext`, built in one place.

They are `TypedDict`s, unpacked into those models' keywords (`ToolContext(**tool_call_ids(...),
attempt=...)`), so each model keeps its own fields and mypy still checks every one.
"""

from __future__ import annotations

from typing import TypedDict

from think.storage import TurnRecord


class TurnIds(TypedDict):
    agent: str
    conversation_id: str
    turn_id: str


class ToolCallIds(TurnIds):
    tool_call_id: str
    tool_name: str


def turn_ids(turn: TurnRecord, agent: str | None = None) -> TurnIds:
    """`turn`'s ids. `agent`: the name of the agent object the hook runs on, where the caller
    holds one (default: the turn's agent)."""
    return {
        "agent": turn.agent if agent is None else agent,
        "conversation_id": turn.conversation_id,
        "turn_id": turn.id,
    }


def tool_call_ids(
    turn: TurnRecord, tool_call_id: str, tool_name: str, agent: str | None = None
) -> ToolCallIds:
    """The ids of the call `tool_call_id` of the tool `tool_name` in `turn` (`agent` as for
    `turn_ids`)."""
    return {**turn_ids(turn, agent), "tool_call_id": tool_call_id, "tool_name": tool_name}
