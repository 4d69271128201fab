"""A failing or stalled model: bounded retries, visible recovery, then `interrupted`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._sse import chunks, finished, read_stream
from tests._stack import Stack
from tests.agents import recovery_calls
from think import Think, TurnConfig, UserError
from think.engine.activities._heartbeat import StreamStalled, within_stall_timeout
from think.testing import FakeOpenAIServer, error, stall, text

BASE = "/v1/agents/staller/conversations"


async def test_a_stall_after_partial_output_is_retried_and_the_partial_dropped(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("half an ") + stall(5), text("whole answer"))
    turn = (await api.post(f"{BASE}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "whole answer", "state": "done"},
    ]
    body, events = await read_stream(api, turn["stream_url"])
    got = chunks(events)
    kinds = [c["type"] for c in got]
    recovering = next(c for c in got if c["type"] == "data-recovering")
    assert recovering["transient"] is True
    assert recovering["data"]["attempt"] == 2
    assert "sent nothing for 1 s" in recovering["data"]["cause"]
    assert kinds.index("text-delta") < kinds.index("reset-step") < len(kinds) - 1
    assert fake_model.calls(cid) == 2
    if (NODE_DIR / "node_modules" / "ai").exists():
        assert (await reconstruct(body))["message"] == turn["message"]


async def test_a_model_that_keeps_stalling_ends_interrupted(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, stall(5), text("partial") + stall(5))
    turn = (await api.post(f"{BASE}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert "interrupted after 2 attempts" in turn["error"]
    assert "sent nothing" in turn["error"]
    assert turn["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Interrupted, sorry.", "state": "done"},
    ]
    messages = (await api.get(f"{BASE}/{cid}/messages")).json()["messages"]
    assert messages[-1]["parts"] == turn["message"]["parts"]
    body, events = await read_stream(api, turn["stream_url"])
    assert finished(chunks(events)[-1]) == {"type": "finish", "finishReason": "interrupted"}
    assert fake_model.calls(cid) == 2  # the budget, not more
    if (NODE_DIR / "node_modules" / "ai").exists():
        assert (await reconstruct(body))["message"] == turn["message"]


async def test_retryable_errors_are_retried_within_the_budget(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(429, "slow down"), text("fine now"))
    turn = (await api.post(f"{BASE}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed"
    assert turn["message"]["parts"][-1]["text"] == "fine now"
    assert fake_model.calls(cid) == 2


async def test_non_retryable_errors_fail_fast(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(401, "bad key"), text("never"))
    turn = (await api.post(f"{BASE}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "error"
    assert "bad key" in turn["error"]
    assert fake_model.calls(cid) == 1


async def test_on_chat_recovery_can_keep_the_partial_and_continue(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("first half, ") + stall(5), text("second half."))
    base = "/v1/agents/persister/conversations"
    turn = (await api.post(f"{base}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "first half, ", "state": "done"},
        {"type": "step-start"},
        {"type": "text", "text": "second half.", "state": "done"},
    ]
    # The continuation was asked with the kept partial in the transcript.
    sent = fake_model.requests(cid)[-1]["body"]["messages"]
    assert sent[-1] == {"role": "assistant", "content": "first half, "}
    body, events = await read_stream(api, turn["stream_url"])
    assert "reset-step" not in [c["type"] for c in chunks(events)]
    if (NODE_DIR / "node_modules" / "ai").exists():
        assert (await reconstruct(body))["message"] == turn["message"]


async def test_on_chat_recovery_can_end_the_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("x") + stall(5), text("never asked"))
    base = "/v1/agents/give_up/conversations"
    turn = (await api.post(f"{base}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert "on_chat_recovery ended the turn" in turn["error"]
    assert turn["message"]["parts"][-1]["text"] == "Interrupted, sorry."
    assert fake_model.calls(cid) == 1


async def test_a_spent_token_budget_stops_the_next_step(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    from think.testing import tool_call

    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("never asked"))
    base = "/v1/agents/budgeted/conversations"
    turn = (await api.post(f"{base}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert turn["error"].startswith("token budget spent")
    assert [p["type"] for p in turn["message"]["parts"]] == ["step-start", "tool-add"]
    assert turn["message"]["parts"][1]["output"] == 3  # what ran is kept
    assert fake_model.calls(cid) == 1
    _, events = await read_stream(api, turn["stream_url"])
    assert finished(chunks(events)[-1]) == {"type": "finish", "finishReason": "length"}


async def test_a_spent_time_budget_stops_the_next_step(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    from think.testing import tool_call

    fake_model.script(cid, tool_call("slow", {"seconds": 1}), text("never asked"))
    base = "/v1/agents/hurried/conversations"
    turn = (await api.post(f"{base}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert turn["error"].startswith("time budget spent")
    assert fake_model.calls(cid) == 1


# -- the stall watchdog is off unless set (a reasoning model may think for minutes) ----------


async def test_with_the_watchdog_off_a_slow_first_token_is_waited_for(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`chat_stream_stall_timeout = 0`: off, never "stalled at once"."""
    fake_model.script(cid, stall(1.5) + text("thought it over"))
    url = f"/v1/agents/patient/conversations/{cid}/turns"
    turn = (await api.post(url, json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"][-1]["text"] == "thought it over"
    _, events = await read_stream(api, turn["stream_url"])
    assert not [c for c in chunks(events) if c["type"] in ("data-recovering", "reset-step")]
    assert fake_model.calls(cid) == 1


async def test_before_turn_turns_the_watchdog_off_for_one_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    url = f"/v1/agents/watchful/conversations/{cid}/turns"
    fake_model.script(cid, stall(1.5) + text("worth the wait"), stall(1.5) + text("too late"))
    turn = (await api.post(url, json={"input": "q", "mode": "wait", "body": {"stall": 0}})).json()
    assert turn["status"] == "completed", turn
    assert turn["message"]["parts"][-1]["text"] == "worth the wait"
    # The agent's own one second still holds for the next turn.
    turn = (await api.post(url, json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert "sent nothing for 1 s" in turn["error"]


async def _slow(delay: float) -> AsyncIterator[str]:
    await asyncio.sleep(delay)
    yield "late"


@pytest.mark.parametrize("seconds", [None, 0, 0.0])
async def test_none_or_zero_is_no_watchdog(seconds: float | None) -> None:
    assert [e async for e in within_stall_timeout(_slow(0.3), seconds)] == ["late"]


async def test_a_watchdog_that_is_set_still_fires() -> None:
    with pytest.raises(StreamStalled):
        [e async for e in within_stall_timeout(_slow(5), 0.1)]


def test_the_watchdog_is_off_by_default_and_checked() -> None:
    assert Think.chat_stream_stall_timeout is None
    assert TurnConfig(chat_stream_stall_timeout=0).stored() == {"chat_stream_stall_timeout": 0}
    with pytest.raises(UserError, match="chat_stream_stall_timeout"):

        class Negative(Think):
            chat_stream_stall_timeout = -1


# -- the recovery hooks' kinds, stash, on_exhausted and the no-progress budget ----------------

SALVAGER = "/v1/agents/salvager/conversations"


async def test_a_stall_calls_on_chat_recovery_with_the_kind_stall_and_the_stash(
    api: httpx.AsyncClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("half an ") + stall(5), text("whole answer"))
    body = {"stall": 1, "stash": {"where": "chapter 2"}}
    submitted = {"input": "q", "mode": "wait", "body": body}
    turn = (await api.post(f"{SALVAGER}/{cid}/turns", json=submitted)).json()
    assert turn["status"] == "completed", turn
    # A stall's default is still to ask again from scratch.
    assert turn["message"]["parts"][-1]["text"] == "whole answer"
    [call] = recovery_calls(stack.env["THINK_HOME"], turn["turn_id"])
    assert call["kind"] == "stall" and call["attempt"] == 1 and call["failures"] == 1
    assert call["data"] == {"where": "chapter 2"}
    assert call["partial_text"] == "half an "
    assert call["incident_id"].startswith(turn["turn_id"])


async def test_a_model_error_calls_on_chat_recovery_with_the_kind_model_error(
    api: httpx.AsyncClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(429, "slow down"), text("fine now"))
    turn = (await api.post(f"{SALVAGER}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed", turn
    [call] = recovery_calls(stack.env["THINK_HOME"], turn["turn_id"])
    assert call["kind"] == "model_error" and call["data"] is None and call["partial"] == []
    assert "slow down" in call["cause"]


async def test_on_exhausted_runs_when_the_recovery_budget_is_spent(
    api: httpx.AsyncClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Four failures of one step, each getting further than the last (so the no-progress
    budget never stops it): the fourth spends `max_attempts`, `on_exhausted` runs, and the
    turn ends `interrupted` with the terminal message."""
    fake_model.script(
        cid, *(text("x" * n) + error(500, "the server had an error") for n in range(1, 5))
    )
    turn = (await api.post(f"{SALVAGER}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert "interrupted after 4 attempts" in turn["error"]
    assert turn["message"]["parts"][-1]["text"] == "Interrupted, sorry."
    calls = recovery_calls(stack.env["THINK_HOME"], turn["turn_id"])
    assert [c["hook"] for c in calls] == [*["on_chat_recovery"] * 3, "on_exhausted"]
    assert calls[-1]["failures"] == 4 and calls[-1]["kind"] == "model_error"
    assert fake_model.calls(cid) == 4


async def test_recoveries_that_make_no_progress_end_the_turn(
    api: httpx.AsyncClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The same failure before any word, twice: the second recovery finds the turn no further
    on (`max_no_progress=1`), so the turn ends although `max_attempts` (4) would allow more."""
    fake_model.script(cid, error(500, "down"), error(500, "down"), text("never asked"))
    turn = (await api.post(f"{SALVAGER}/{cid}/turns", json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "interrupted", turn
    assert "no progress in 2 recoveries in a row" in turn["error"]
    calls = recovery_calls(stack.env["THINK_HOME"], turn["turn_id"])
    assert [c["hook"] for c in calls] == ["on_chat_recovery", "on_exhausted"]
    assert calls[0]["incident_id"] == calls[1]["incident_id"]
    assert [c["attempt"] for c in calls] == [1, 2]
    assert fake_model.calls(cid) == 2


async def test_a_recovery_hook_that_raises_ends_the_turn_cleanly(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("half") + error(500, "oops"), text("never asked"))
    body = {"stash": {"answer": "raise"}}
    submitted = {"input": "q", "mode": "wait", "body": body}
    turn = (await api.post(f"{SALVAGER}/{cid}/turns", json=submitted)).json()
    assert turn["status"] == "error", turn
    assert "failed in recovery because of an internal error" in turn["error"]
    assert turn["message"]["parts"][-1]["text"] == "half"  # what was said is kept
    assert fake_model.calls(cid) == 1


async def test_stash_outside_a_turn_says_where_it_works() -> None:
    with pytest.raises(UserError, match="only inside a turn"):
        await Think().stash({"x": 1})
