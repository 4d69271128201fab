"""Cancelling turns: running ones stop within about a second and keep their partial answer,
queued ones never start, finished ones are left alone."""

from __future__ import annotations

import asyncio
import time

import httpx
from temporalio.client import Client

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._sse import chunks, deltas, read_stream, read_until, until_terminal
from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, reply, stall, text, tool_call
from think.workflows.names import turn_workflow_id

WORDS = [f"w{i} " for i in range(60)]


async def test_cancel_running_keeps_the_partial_answer(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))  # ~3 s of streaming
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "long"})).json()
    await read_until(api, turn["stream_url"], deltas(5))
    asked = time.monotonic()
    cancelled = await api.post(f"{turn['status_url']}/cancel", json={"reason": "user pressed stop"})
    assert cancelled.status_code == 202
    final = await until_terminal(api, turn["status_url"])
    took = time.monotonic() - asked
    assert final["status"] == "aborted"
    assert final["error"] == "user pressed stop"
    assert took < 1.0, f"cancel took {took:.2f} s"

    partial = final["message"]["parts"][-1]["text"]
    assert 0 < len(partial) < len("".join(WORDS))
    assert "".join(WORDS).startswith(partial)
    stored = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert stored[-1]["id"] == turn["message_id"]
    assert stored[-1]["parts"] == final["message"]["parts"]

    body, events = await read_stream(api, turn["stream_url"])
    got = chunks(events)
    assert got[-1] == {"type": "abort", "reason": "user pressed stop"}
    assert events[-1].data == "[DONE]"
    if (NODE_DIR / "node_modules" / "ai").exists():
        assert (await reconstruct(body))["message"] == stored[-1]

    # A second cancel changes nothing.
    again = await api.post(f"{turn['status_url']}/cancel")
    assert again.status_code == 200
    assert again.json()["status"] == "aborted"


async def test_a_cancel_lands_within_a_second_under_load(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Twelve other turns stream at the same time; the cancelled one still stops within a
    second of its `POST …/cancel`, with its partial answer, and the others finish."""
    others = [f"{cid}-load{i}" for i in range(12)]
    for other in [cid, *others]:
        fake_model.script(other, reply(text(*WORDS), delay=0.05))
    busy = [
        (await api.post(f"{helper_path(o)}/turns", json={"input": "long"})).json() for o in others
    ]
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "long"})).json()
    await read_until(api, turn["stream_url"], deltas(5))
    asked = time.monotonic()
    cancelled = await api.post(f"{turn['status_url']}/cancel", json={"reason": "stop"})
    assert cancelled.status_code == 202
    final = await until_terminal(api, turn["status_url"])
    took = time.monotonic() - asked
    assert final["status"] == "aborted", final
    assert took < 1.0, f"cancel took {took:.2f} s under load"
    partial = final["message"]["parts"][-1]["text"]
    assert 0 < len(partial) < len("".join(WORDS))
    for other in busy:
        assert (await until_terminal(api, other["status_url"]))["status"] == "completed"


async def test_a_cancel_between_a_steps_read_and_its_stream_is_not_missed(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The cancel lands after step 1 has read its turn (which shows none) and before its
    stream watches for one (`before_step` asks for it): the step still stops at once, where
    it used to stream on until Temporal's workflow cancel reached it, seconds later."""
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("Three.") + stall(8))
    url = f"/v1/agents/self-cancelling/conversations/{cid}/turns"
    asked = time.monotonic()
    turn = (await api.post(url, json={"input": "1+2?"})).json()
    final = await until_terminal(api, turn["status_url"])
    took = time.monotonic() - asked
    assert final["status"] == "aborted", final
    assert final["error"] == "changed my mind"
    assert took < 2.0, f"the turn stopped {took:.2f} s after its submission"


async def test_cancel_pending_never_starts(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text("slow first answer"), delay=0.2))
    first = (await api.post(f"{helper_path(cid)}/turns", json={"input": "first"})).json()
    queued = (await api.post(f"{helper_path(cid)}/turns", json={"input": "second"})).json()
    assert queued["status"] == "pending"
    cancelled = await api.post(f"{queued['status_url']}/cancel")
    assert cancelled.status_code == 202
    assert cancelled.json()["status"] == "aborted"
    assert (await until_terminal(api, first["status_url"]))["status"] == "completed"
    _, events = await read_stream(api, queued["stream_url"])
    assert chunks(events) == [{"type": "abort", "reason": "cancelled"}]
    await asyncio.sleep(0.3)  # the entity still dequeues it: it must do nothing
    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert [m["parts"][-1]["text"] for m in messages] == ["first", "slow first answer"]
    assert fake_model.calls(cid) == 1
    assert (await api.get(queued["status_url"])).json()["status"] == "aborted"


async def test_cancel_after_completion_changes_nothing(api: httpx.AsyncClient, cid: str) -> None:
    done = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "quick", "mode": "wait"})
    ).json()
    response = await api.post(f"{done['status_url']}/cancel", json={"reason": "too late"})
    assert response.status_code == 200
    after = response.json()
    assert after["status"] == "completed" and after["error"] is None
    assert after["message"] == done["message"]
    missing = await api.post(f"{helper_path(cid)}/turns/turn_nope/cancel")
    assert missing.status_code == 404


async def test_a_tool_call_cut_off_by_a_cancel_is_repaired_for_the_next_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    from think.testing import tool_call

    fake_model.script(cid, tool_call("slow", {"seconds": 10}, id="call_slow"), text("next"))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "wait"})).json()
    # Cancel once the model has asked for the tool and the tool is running.
    await read_until(
        api, turn["stream_url"], lambda got: any(c["type"] == "tool-input-available" for c in got)
    )
    await asyncio.sleep(0.3)
    assert (await api.post(f"{turn['status_url']}/cancel")).status_code == 202
    final = await until_terminal(api, turn["status_url"])
    assert final["status"] == "aborted"
    tool_part = next(p for p in final["message"]["parts"] if p["type"] == "tool-slow")
    assert tool_part["state"] == "input-available"  # stored as it was: never rewritten

    second = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "again", "mode": "wait"})
    ).json()
    assert second["status"] == "completed"
    sent = fake_model.requests(cid)[-1]["body"]["messages"]
    answer = next(m for m in sent if m["role"] == "tool" and m["tool_call_id"] == "call_slow")
    assert "interrupted" in answer["content"]


async def test_a_cancel_from_the_temporal_ui_aborts_the_turn_and_the_next_one_runs(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """An operator's "Request cancellation" on a streaming turn's workflow (here through the
    client, as the UI does) ends the turn `aborted` with what had streamed, not `error`, and
    the conversation's next turn runs. Such a cancel is not noted in Postgres, so it reaches
    the step with its workflow task's next heartbeat, within a few seconds."""
    fake_model.script(cid, reply(text(*WORDS), delay=0.25), reply(text("next")))  # ~15 s
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "long"})).json()
    queued = (await api.post(f"{helper_path(cid)}/turns", json={"input": "then"})).json()
    await read_until(api, turn["stream_url"], deltas(3))
    await temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"])).cancel()
    final = await until_terminal(api, turn["status_url"])
    assert final["status"] == "aborted", final
    partial = final["message"]["parts"][-1]["text"] if final["message"]["parts"] else ""
    assert "".join(WORDS).startswith(partial) and len(partial) < len("".join(WORDS))
    after = await until_terminal(api, queued["status_url"])
    assert after["status"] == "completed", after
    assert after["message"]["parts"][-1]["text"] == "next"
