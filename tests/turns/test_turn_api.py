"""The Python turn API (`think.ThinkService`): run_turn's three modes and its shortcuts, from
application code and from inside a turn (tools and hooks on the worker), and the guard that
makes a deadlock impossible."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._sse import started
from tests._stack import Stack
from tests._turn_helpers import CallbackRecorder, slow, transcript
from tests._waits import eventually
from think import Think, ThinkService, UIMessage, UserError, current_conversation
from think.storage import MessageIdConflict
from think.testing import FakeOpenAIServer, text, tool_call

README = Path(__file__).parents[2] / "README.md"


async def test_the_three_modes(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("first answer"), text("second answer"), text("third answer"))
    conv = service.conversation("helper", cid)

    result = await conv.run_turn("one")  # wait (the default)
    assert result.status == "completed" and result.done and result.accepted
    assert result.message is not None and result.message.parts[-1]["text"] == "first answer"
    assert result.request_id == result.turn_id

    submission = await conv.run_turn("two", mode="submit", idempotency_key="two")
    # The conversation was idle: its admission started it (running; its workflow is on the way).
    assert submission.accepted and submission.status == "running"
    again = await conv.run_turn("two", mode="submit", idempotency_key="two")
    assert again.turn_id == submission.turn_id and not again.accepted
    assert (await conv.result(submission.turn_id)).status == "completed"

    stream = await conv.run_turn("three", mode="stream")
    got = [chunk async for chunk in stream]
    assert started(got[0]) == {"type": "start", "messageId": got[0]["messageId"]}
    assert "".join(c["delta"] for c in got if c["type"] == "text-delta") == "third answer"
    assert got[-1]["type"] == "finish"
    assert (await stream.result()).status == "completed"
    assert [t for _, t in transcript(await conv.messages())] == [
        "one",
        "first answer",
        "two",
        "second answer",
        "three",
        "third answer",
    ]


async def test_input_forms_and_a_function_of_the_current_messages(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    message = UIMessage(
        id=f"{cid}-m1", role="user", parts=[{"type": "text", "text": "as a message"}]
    )
    assert (await conv.save_messages(message)).status == "completed"
    as_dicts = [
        {"id": f"{cid}-m2", "role": "user", "parts": [{"type": "text", "text": "as a dict"}]}
    ]
    assert (await conv.save_messages(as_dicts)).status == "completed"

    seen: list[int] = []

    def more(current: list[UIMessage]) -> list[UIMessage]:
        seen.append(len(current))
        return [*current, UIMessage.user_text(f"after {len(current)} messages")]

    result = await conv.save_messages(more)
    assert result.status == "completed" and seen == [4]
    assert [t for _, t in transcript(await conv.messages())][-2:] == [
        "after 4 messages",
        "echo: after 4 messages",
    ]
    with pytest.raises(UserError, match="submit takes messages"):
        await conv.run_turn(more, mode="submit")
    for empty in ("", "  ", []):
        with pytest.raises(UserError):
            await conv.save_messages(empty)


async def test_submit_from_inside_a_tool_runs_after_the_turn(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("follow_up", {"question": "and then?"}),
        text("I queued a follow-up."),
        text("then this"),
    )
    conv = service.conversation("delegator", cid)
    first = await conv.run_turn("go")
    assert first.status == "completed"
    assert first.message is not None
    output = next(p for p in first.message.parts if p["type"] == "tool-follow_up")["output"]
    follow_up = output.removeprefix("queued ")
    assert (await conv.result(follow_up)).status == "completed"
    assert transcript(await conv.messages()) == [
        ("user", "go"),
        ("assistant", "I queued a follow-up."),
        ("user", "and then?"),
        ("assistant", "then this"),
    ]
    listed = await conv.list_submissions()
    assert [s.turn_id for s in listed] == [follow_up, first.turn_id]  # newest first


async def test_a_blocking_call_inside_a_turn_raises_instead_of_deadlocking(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("wait_inside", {"question": "inner"}), text("fine"))
    conv = service.conversation("delegator", cid)
    result = await asyncio.wait_for(conv.run_turn("go"), timeout=60)
    assert result.status == "completed" and result.message is not None
    output = next(p for p in result.message.parts if p["type"] == "tool-wait_inside")["output"]
    assert output.startswith("refused: run_turn(mode='wait') inside turn")
    assert 'use run_turn(..., mode="submit")' in output and "deadlock" in output
    assert [t for _, t in transcript(await conv.messages())] == ["go", "fine"]
    assert len(await conv.list_submissions()) == 1  # nothing was admitted


async def test_outside_a_turn_there_is_no_current_conversation() -> None:
    with pytest.raises(UserError, match="only inside a turn"):
        await current_conversation()
    with pytest.raises(UserError, match="only inside a turn"):
        await Think().submit_messages("hello")


async def test_add_messages_inside_a_turn_stays_on_the_active_path(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("remember", {"note": "n1"}), text("Noted."))
    conv = service.conversation("delegator", cid)
    result = await conv.run_turn("remember n1")
    assert result.status == "completed"
    assert transcript(await conv.messages()) == [
        ("user", "remember n1"),
        ("user", "n1"),
        ("assistant", "Noted."),
    ]


async def test_add_messages_is_idempotent_by_id(service: ThinkService, cid: str) -> None:
    conv = service.conversation("helper", cid)
    batch = [
        UIMessage(id="imp-1", role="user", parts=[{"type": "text", "text": "imported 1"}]),
        UIMessage(id="imp-2", role="assistant", parts=[{"type": "text", "text": "imported 2"}]),
    ]
    assert await conv.add_messages(batch) == ["imp-1", "imp-2"]
    assert await conv.add_messages(batch) == []  # a repeat changes nothing
    assert transcript(await conv.messages()) == [
        ("user", "imported 1"),
        ("assistant", "imported 2"),
    ]
    changed = batch[1].model_copy(update={"parts": [{"type": "text", "text": "edited"}]})
    with pytest.raises(MessageIdConflict):
        await conv.add_messages(changed)
    assert await conv.add_messages(changed, mode="upsert") == ["imp-2"]
    assert transcript(await conv.messages()) == [("user", "imported 1"), ("assistant", "edited")]
    # The next turn sees them.
    result = await conv.save_messages("and now?")
    assert result.status == "completed"
    assert [t for _, t in transcript(await conv.messages())] == [
        "imported 1",
        "edited",
        "and now?",
        "echo: and now?",
    ]


async def test_continue_last_turn(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    # Nothing to continue: no message at all, then a user message last.
    assert (await conv.continue_last_turn()).status == "skipped"
    await conv.add_messages(UIMessage.user_text("a question nobody answered"))
    skipped = await conv.continue_last_turn(body={"why": "test"})
    assert skipped.status == "skipped" and skipped.continuation
    assert skipped.error == "skipped: the last message is not the assistant's: nothing to continue"
    assert fake_model.calls(cid) == 0

    fake_model.script(cid, text("Part one."), text("Part two."))
    first = await conv.save_messages("tell me")
    assert first.status == "completed" and first.message is not None
    more = await conv.continue_last_turn()
    assert more.status == "completed" and more.continuation and more.message is not None
    assert transcript(await conv.messages())[-3:] == [
        ("user", "tell me"),
        ("assistant", "Part one."),
        ("assistant", "Part two."),
    ]
    sent = fake_model.requests(cid)[-1]["body"]["messages"]
    assert sent[-1] == {"role": "assistant", "content": "Part one."}


async def test_chat_drives_the_callback(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello there."), slow())
    conv = service.conversation("helper", cid)
    calls: list[Any] = []

    result = await conv.chat("hi", CallbackRecorder(calls))
    assert result.status == "completed"
    assert calls[0] == ("start", result.turn_id)
    assert calls[1] == "start" and calls[-2] == "finish" and calls[-1] == "done"

    # Cancelled mid-stream with cancel_chat: a terminal outcome, so on_error (never
    # on_interrupted, which says a continuation owns the answer).
    calls.clear()

    class Canceller(CallbackRecorder):
        async def on_event(self, chunk: dict[str, Any]) -> None:
            calls.append(chunk["type"])
            if chunk["type"] == "text-delta" and calls.count("text-delta") == 2:
                assert await conv.cancel_chat(calls[0][1], "caller went away")

    cancelled = await conv.chat("long one", Canceller(calls))
    assert cancelled.status == "aborted" and cancelled.error == "caller went away"
    assert calls[-2:] == ["abort", ("error", "aborted: caller went away")]
    assert "interrupted" not in calls
    assert not await conv.cancel_chat(cancelled.turn_id)  # ended already: no-op
    assert not await conv.cancel_chat("turn_unknown")


async def test_on_chat_response_can_wait_for_another_turn(
    service: ThinkService, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """The hook runs after the turn, so the agent's own blocking `save_messages` is allowed
    there (and chains a turn, as in the spec)."""
    fake_model.script(cid, text("CHAIN please"), text("chained answer"))
    conv = service.conversation("delegator", cid)
    assert (await conv.run_turn("start")).status == "completed"
    for _ in range(300):
        turns = await conv.list_submissions()
        if len(turns) == 2 and turns[0].status == "completed":
            break
        await asyncio.sleep(0.1)
    assert transcript(await conv.messages()) == [
        ("user", "start"),
        ("assistant", "CHAIN please"),
        ("user", "chained question"),
        ("assistant", "chained answer"),
    ]
    expected = {"status": "completed", "turn_id": turns[0].turn_id, "hook": "chained"}

    async def chained() -> bool:
        # The hook logs once the turn it waited for has ended: just after its status did.
        log = (stack.logs / "turn-hooks.log").read_text().splitlines()
        return expected in [json.loads(line) for line in log if '"hook": "chained"' in line]

    assert await eventually(chained, within=10)


async def test_submission_id_and_idempotency_key(service: ThinkService, cid: str) -> None:
    from think import SubmissionConflict

    conv = service.conversation("helper", cid)
    first = await conv.submit_messages("hi", submission_id=f"{cid}-s1", idempotency_key="k1")
    assert first.turn_id == f"{cid}-s1" and first.accepted
    again = await conv.submit_messages("hi", submission_id=f"{cid}-s1", idempotency_key="k1")
    assert again.turn_id == first.turn_id and not again.accepted
    with pytest.raises(SubmissionConflict):
        await conv.submit_messages("hi", submission_id=f"{cid}-s1", idempotency_key="k2")
    with pytest.raises(SubmissionConflict):
        await conv.submit_messages("hi", submission_id=f"{cid}-s2", idempotency_key="k1")
    with pytest.raises(UserError, match="not a valid id"):
        await conv.submit_messages("hi", submission_id="no spaces allowed")
    assert (await conv.result(first.turn_id)).status == "completed"


async def test_the_readme_examples_run(
    service: ThinkService,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """README's "Submitting turns from code" block, against the test stack's `helper`."""
    block = next(
        b
        for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
        if "async def submitting_turns" in b
    )
    namespace: dict[str, Any] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    # The first four model calls answer at once; "Draft a long reply" streams slowly, so the
    # "drop" submission meets a busy conversation and the "interrupt" one a running turn.
    fake_model.script(cid, *(text(f"answer {n}") for n in range(4)), slow())
    await namespace["submitting_turns"](service, "helper", cid)
    assert "busy with" in capsys.readouterr().out
    assert {s.status for s in await service.conversation("helper", cid).list_submissions()} <= {
        "completed",
        "skipped",
        "aborted",
    }


async def test_wait_until_idle_waits_for_every_queued_and_running_turn(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think's `waitUntilStable`: True once the conversation has no active turn, False when
    the wait ends first, at once when nothing runs."""
    fake_model.script(cid, slow(), text("second answer"))
    conv = service.conversation("helper", cid)
    assert await conv.wait_until_idle(wait_timeout=0) is True  # no conversation yet: idle
    first = await conv.run_turn("one", mode="submit")
    second = await conv.run_turn("two", mode="submit")
    assert await conv.wait_until_idle(wait_timeout=0.05) is False
    assert await conv.wait_until_idle(wait_timeout=60) is True
    assert (await conv.result(first.turn_id, wait_timeout=0)).status == "completed"
    assert (await conv.result(second.turn_id, wait_timeout=0)).status == "completed"
    assert [t for _, t in transcript(await conv.messages())][-1] == "second answer"


async def test_a_turn_paused_for_approval_keeps_the_conversation_busy(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}), text("deleted"))
    conv = service.conversation("gatekeeper", cid)
    paused = await conv.run_turn("rm x")
    assert paused.status == "awaiting_approval"
    assert await conv.wait_until_idle(wait_timeout=0.5) is False
    status = await api.get(f"/v1/agents/gatekeeper/conversations/{cid}/turns/{paused.turn_id}")
    approval_id = status.json()["pending_approvals"][0]["approval_id"]
    decided = await api.post(
        f"/v1/agents/gatekeeper/conversations/{cid}/turns/{paused.turn_id}/approvals/{approval_id}",
        json={"approved": True},
    )
    assert decided.status_code in (200, 202), decided.text
    assert await conv.wait_until_idle(wait_timeout=60) is True
    assert (await conv.result(paused.turn_id, wait_timeout=0)).status == "completed"


async def test_wait_until_idle_inside_its_own_turn_is_refused(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("wait_idle_inside", {}), text("fine"))
    result = await service.conversation("delegator", cid).run_turn("go")
    assert result.status == "completed" and result.message is not None
    output = next(p for p in result.message.parts if p["type"] == "tool-wait_idle_inside")
    assert "deadlock" in output["output"] and "waiting for the conversation" in output["output"]
