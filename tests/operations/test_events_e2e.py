"""The events a real worker emits, as an application subscribed to `think.events` sees them.

tests/agents.py subscribes at import (in the worker process) and writes every event as a JSON
line under THINK_HOME; these tests read them back.
"""

from __future__ import annotations

import httpx

from tests._logs import emitted
from tests._stack import Stack
from tests._turn_helpers import wait_turn
from think.testing import FakeOpenAIServer, stall, text, tool_call


async def test_a_stalling_model_emits_stall_recovery_and_exhaustion(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, stall(5), stall(5))
    turn = await wait_turn(api, "staller", cid)
    assert turn["status"] == "interrupted"
    got = await emitted(stack, cid, "chat.turn.finished")
    kinds = [e.type for e in got]
    assert kinds == [
        "chat.turn.started",
        "chat.request.failed",
        "chat.stream.stalled",
        "chat.recovery.attempt",
        "chat.request.failed",
        "chat.stream.stalled",
        "chat.recovery.exhausted",
        "chat.turn.finished",
    ]
    stalled = next(e for e in got if e.type == "chat.stream.stalled")
    assert stalled.timeout == 1.0 and stalled.turn_id == turn["turn_id"]
    exhausted = next(e for e in got if e.type == "chat.recovery.exhausted")
    assert exhausted.attempts == 2 and "sent nothing" in exhausted.cause
    finished = got[-1]
    assert finished.type == "chat.turn.finished"
    assert finished.status == "interrupted" and finished.finish_reason == "interrupted"


async def test_a_spent_budget_is_an_event(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("never"))
    turn = await wait_turn(api, "budgeted", cid)
    assert turn["status"] == "interrupted"
    got = await emitted(stack, cid, "chat.turn.finished")
    budget = next(e for e in got if e.type == "chat.budget.exhausted")
    assert budget.which == "tokens" and budget.limit == 1 and budget.used > 1
    assert [e.type for e in got] == [
        "chat.turn.started",
        "tool.call",
        "chat.budget.exhausted",
        "chat.turn.finished",
    ]


async def test_approvals_and_tool_calls_are_events(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("delete_file", {"path": "x"}, id="call_x") + tool_call("add", {"a": 1}, id="c2"),
        text("ok"),
    )
    turn = await wait_turn(api, "gatekeeper", cid)
    approval_id = turn["pending_approvals"][0]["approval_id"]
    url = f"{turn['status_url']}/approvals/{approval_id}"
    await api.post(url, json={"approved": False, "reason": "no"})
    got = await emitted(stack, cid, "chat.turn.finished")
    requested = next(e for e in got if e.type == "tool.approval.requested")
    assert requested.approval_id == approval_id and requested.tool_name == "delete_file"
    decided = next(e for e in got if e.type == "tool.approval.decided")
    assert (decided.approved, decided.reason, decided.by) == (False, "no", "http")
    calls = {(e.tool_name, e.outcome) for e in got if e.type == "tool.call"}
    assert calls == {("delete_file", "denied"), ("add", "success")}
    finished = got[-1]
    assert finished.type == "chat.turn.finished" and finished.status == "completed"
    assert finished.usage.input_tokens > 0
    # Started once, before anything else, though the turn took two steps.
    started = [e for e in got if e.type == "chat.turn.started"]
    assert [e.type for e in got].index("chat.turn.started") == 0 and len(started) == 1
    assert started[0].turn_id == turn["turn_id"] and started[0].model == "openai:scripted-model"
    assert started[0].queued_ms >= 0
