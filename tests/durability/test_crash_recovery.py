"""A worker SIGKILLed mid-stream: the turn finishes on another worker, and the client ends with
exactly one copy of the answer (the stream carries `reset-step` before the retried step)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._sse import chunks, deltas, finished, parse, read_stream, read_until, until_terminal
from tests._stack import Stack, own_stack
from tests._waits import eventually, now
from tests.agents import recovery_calls
from think._messages import UIMessage
from think._settings import Settings
from think.storage import Store, TurnRequest, open_database
from think.testing import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    FakeResponsesServer,
    reply,
    stall,
    text,
    tool_call,
)

WORDS = [f"word{i} " for i in range(40)]


@pytest.fixture(scope="module")
def crash_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A gateway and a worker of their own (own task queue), so killing them hurts no one."""
    logs = tmp_path_factory.mktemp("crash")
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": "think-crash",
        "THINK_TEST_TOOL_LOG": str(logs / "tool-runs.log"),
        "THINK_TEST_COUNTDOWN_PAUSE": "0.4",  # a streaming tool slow enough to die in
    }
    with own_stack(env, logs) as own:
        yield own


def _kept_then_continued(answer: dict[str, Any], rest: str) -> str:
    """The parts of an answer whose lost step was kept and continued in a new step: the
    partial (a prefix of the lost step's words, closed) then `rest`; returns the partial."""
    parts = answer["parts"]
    assert [p["type"] for p in parts] == ["step-start", "text", "step-start", "text"], parts
    partial = parts[1]["text"]
    assert partial and "".join(WORDS).startswith(partial), partial
    assert parts[1]["state"] == "done"
    assert parts[3] == {"type": "text", "text": rest, "state": "done"}
    return str(partial)


async def test_sigkill_mid_stream_keeps_the_partial_and_continues_on_another_worker(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think's default after an eviction: the partial is persisted and the turn continues. The
    words the dead worker streamed stay (once), a new step carries on from them, and a client
    following the stream rebuilds the same message: nothing dropped, nothing twice."""
    slow = reply(text(*WORDS), delay=0.05)  # ~2 s of streaming
    fake_model.script(cid, slow, text("and the rest."))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/helper/conversations/{cid}"
        turn = (await api.post(f"{base}/turns", json={"input": "tell me"})).json()

        # Wait until part of the answer has been streamed, then kill the worker outright.
        await read_until(api, turn["stream_url"], deltas(5))
        crash_stack.replace_worker()

        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        stored = (await api.get(f"{base}/messages")).json()["messages"]
        answer = next(m for m in stored if m["id"] == turn["message_id"])
        partial = _kept_then_continued(answer, "and the rest.")
        # The continuation was asked with the kept words as the assistant's so far.
        sent = fake_model.requests(cid)[-1]["body"]["messages"]
        assert sent[-1] == {"role": "assistant", "content": partial}

        body, events = await read_stream(api, turn["stream_url"])
        got = chunks(events)
        kinds = [c["type"] for c in got]
        assert "reset-step" not in kinds and kinds[-1] == "finish"
        streamed = "".join(c["delta"] for c in got if c["type"] == "text-delta")
        assert streamed == partial + "and the rest."  # each word once
        recovering = next(c for c in got if c["type"] == "data-recovering")
        assert recovering["data"]["kind"] == "crash"
        assert fake_model.calls(cid) == 2  # the killed attempt and the continuation
        if (NODE_DIR / "node_modules" / "ai").exists():
            rebuilt = await reconstruct(body)
            assert rebuilt["message"] == answer


async def salvaged(
    api: httpx.AsyncClient, stack: Stack, cid: str, body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A `salvager` turn (its hooks read `body`) whose worker is SIGKILLed five words into the
    answer: the turn as submitted, and as it ended on the worker that took over."""
    base = f"/v1/agents/salvager/conversations/{cid}"
    turn = (await api.post(f"{base}/turns", json={"input": "tell me", "body": body})).json()
    await read_until(api, turn["stream_url"], deltas(5))
    stack.replace_worker()
    return turn, await until_terminal(api, turn["status_url"])


async def test_sigkill_mid_stream_calls_on_chat_recovery_with_crash_the_stash_and_the_partial(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`on_chat_recovery` runs for a crash too, on the worker that takes over: `kind="crash"`,
    the first attempt of its incident, the value `stash()` kept (in `before_turn`, on the dead
    worker) and the partial the lost attempt streamed, which its default then keeps."""
    fake_model.script(cid, reply(text(*WORDS), delay=0.05), text("the rest."))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        stash = {"job": "essay", "page": 3}
        _, final = await salvaged(api, crash_stack, cid, {"stash": stash})
        assert final["status"] == "completed", final
        partial = _kept_then_continued(final["message"], "the rest.")
    [call] = recovery_calls(crash_stack.env["THINK_HOME"], final["turn_id"])
    assert call["hook"] == "on_chat_recovery"
    assert call["kind"] == "crash" and call["attempt"] == 1 and call["step"] == 0
    assert call["incident_id"].startswith(final["turn_id"])
    assert call["data"] == stash
    assert call["created_at"] is not None and call["failures"] == 0
    assert call["partial_text"] == partial
    assert [(p["type"], p["text"]) for p in call["partial"]] == [("text", partial)]


async def test_a_crash_recovery_that_does_not_persist_asks_again_from_scratch(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`{"persist": False}`: the partial is dropped (`reset-step`) and the step asked again, so
    the answer holds the retried words once."""
    slow = reply(text(*WORDS), delay=0.05)
    fake_model.script(cid, slow, slow)
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        turn, final = await salvaged(
            api, crash_stack, cid, {"stash": {"answer": {"persist": False}}}
        )
        assert final["status"] == "completed", final
        assert final["message"]["parts"] == [
            {"type": "step-start"},
            {"type": "text", "text": "".join(WORDS), "state": "done"},
        ]
        body_text, events = await read_stream(api, turn["stream_url"])
        kinds = [c["type"] for c in chunks(events)]
        assert kinds.count("reset-step") == 1
        assert kinds.index("reset-step") > kinds.index("text-delta")
        assert kinds[-1] == "finish"
        assert fake_model.calls(cid) == 2  # the killed attempt and its retry
        if (NODE_DIR / "node_modules" / "ai").exists():
            assert (await reconstruct(body_text))["message"] == final["message"]
    [call] = recovery_calls(crash_stack.env["THINK_HOME"], final["turn_id"])
    assert call["kind"] == "crash"


async def test_a_crash_recovery_that_does_not_continue_ends_the_turn_with_the_partial(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`{"continue": False}`: the turn ends `interrupted` at once, keeping what was streamed;
    the model is not asked again."""
    fake_model.script(cid, reply(text(*WORDS), delay=0.05), text("never asked"))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        turn, final = await salvaged(
            api, crash_stack, cid, {"stash": {"answer": {"continue": False}}}
        )
        assert final["status"] == "interrupted", final
        assert "on_chat_recovery ended the turn" in final["error"]
        parts = final["message"]["parts"]
        assert [p["type"] for p in parts] == ["step-start", "text"]
        assert "".join(WORDS).startswith(parts[1]["text"]) and parts[1]["state"] == "done"
        assert fake_model.calls(cid) == 1
        body_text, events = await read_stream(api, turn["stream_url"])
        assert finished(chunks(events)[-1]) == {"type": "finish", "finishReason": "interrupted"}
        if (NODE_DIR / "node_modules" / "ai").exists():
            assert (await reconstruct(body_text))["message"] == final["message"]


async def test_a_recovery_hook_that_raises_after_a_crash_ends_the_turn_with_an_error(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.05), text("never asked"))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        turn, final = await salvaged(api, crash_stack, cid, {"stash": {"answer": "raise"}})
        assert final["status"] == "error", final
        assert "failed in recovery because of an internal error" in final["error"]
        assert "broke" not in final["error"]  # the hook's words stay in the worker's log
        assert final["message"]["parts"][1]["type"] == "text"
        assert fake_model.calls(cid) == 1
        _, events = await read_stream(api, turn["stream_url"])
        assert chunks(events)[-1]["type"] == "error"


async def test_crash_recovery_that_makes_no_progress_is_exhausted(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A step whose worker dies before its first word, and again: the second recovery finds
    the turn no further on than the first did (`max_no_progress=1`), so the turn ends
    `interrupted` with the terminal message, after `on_exhausted`, instead of looping."""
    fake_model.script(cid, stall(60), stall(60), text("never asked"))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/salvager/conversations/{cid}"
        turn = (await api.post(f"{base}/turns", json={"input": "tell me"})).json()

        def started(got: list[dict[str, Any]]) -> bool:
            return any(c["type"] == "start-step" for c in got)

        def recovering(got: list[dict[str, Any]]) -> bool:
            return any(c["type"] == "data-recovering" for c in got)

        await read_until(api, turn["stream_url"], started)
        crash_stack.replace_worker()
        await read_until(api, turn["stream_url"], recovering)  # the second attempt runs
        await eventually(lambda: now(fake_model.calls(cid) >= 2))  # and has asked the model
        crash_stack.replace_worker()
        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "interrupted", final
        assert "no progress in 2 recoveries in a row" in final["error"]
        assert final["message"]["parts"][-1]["text"] == "Interrupted, sorry."
        assert fake_model.calls(cid) == 2  # not asked a third time
    calls = recovery_calls(crash_stack.env["THINK_HOME"], final["turn_id"])
    assert [c["hook"] for c in calls] == ["on_chat_recovery", "on_exhausted"]
    assert [c["kind"] for c in calls] == ["crash", "crash"]
    assert [c["attempt"] for c in calls] == [1, 2]
    assert calls[0]["incident_id"] == calls[1]["incident_id"]
    assert calls[0]["partial"] == []


async def test_a_step_that_delivered_a_steer_killed_mid_stream_delivers_it_once(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A steering message joins step 2; the worker dies while step 2 streams. The attempt that
    replaces it keeps what step 2 streamed, the steering message with it, and continues in a
    step 3: the stored answer and the AI SDK's client each hold the message once, and it is
    not delivered again."""
    first = reply(text(*WORDS[:10]) + tool_call("add", {"a": 1, "b": 1}, id="c1"), delay=0.05)
    fake_model.script(cid, first, reply(text(*WORDS), delay=0.05), text("done."))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/helper/conversations/{cid}"
        turn = (await api.post(f"{base}/turns", json={"input": "go"})).json()
        await read_until(api, turn["stream_url"], deltas(2))
        steered = await api.post(f"{turn['status_url']}/steer", json={"input": "be brief"})
        assert steered.status_code == 202, steered.text
        await read_until(api, turn["stream_url"], deltas(10 + 5))  # step 2 is streaming
        crash_stack.replace_worker()

        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        steers = [p for p in final["message"]["parts"] if p["type"] == "steering-message"]
        assert [s["parts"] for s in steers] == [[{"type": "text", "text": "be brief"}]]
        assert final["message"]["parts"][-1]["text"] == "done."
        assert fake_model.calls(cid) == 3  # step 1, the killed step 2, its continuation
        last = fake_model.requests(cid)[1]["body"]["messages"][-1]
        assert last == {"role": "user", "content": "be brief"}
        body, events = await read_stream(api, turn["stream_url"])
        kinds = [c["type"] for c in chunks(events)]
        assert "reset-step" not in kinds and kinds.count("steering-message") == 1
        if (NODE_DIR / "node_modules" / "ai").exists():
            assert (await reconstruct(body))["message"] == final["message"]


async def test_sigkill_mid_stream_on_anthropic_keeps_the_partial_and_continues(
    crash_stack: Stack, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    """The same crash on Anthropic's Messages API, which keeps nothing to pick up: the
    partial is kept and a new step continues from it; the client holds each word once."""
    fake_anthropic.script(cid, reply(text(*WORDS), delay=0.05), text("and the rest."))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/switchable/conversations/{cid}"
        body = {"settings": {"model": "claude/claude-sonnet-4-5"}}
        turn = (await api.post(f"{base}/turns", json={"input": "tell me", "body": body})).json()
        await read_until(api, turn["stream_url"], deltas(5))
        crash_stack.replace_worker()
        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        _kept_then_continued(final["message"], "and the rest.")
        assert fake_anthropic.calls(cid) == 2  # the killed attempt and the continuation
        _, events = await read_stream(api, turn["stream_url"])
        kinds = [c["type"] for c in chunks(events)]
        assert "reset-step" not in kinds and kinds[-1] == "finish"


async def test_sigkill_mid_stream_picks_the_background_response_up_without_asking_again(
    crash_stack: Stack, fake_responses: FakeResponsesServer, cid: str
) -> None:
    """Zero-token recovery: in background mode the provider runs the response on its own, and
    the step recorded its id when it was created. The attempt that replaces the killed one
    streams that response again (`starting_after`) instead of asking: one request, paid once."""
    fake_responses.script(cid, reply(text(*WORDS), delay=0.05))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/switchable/conversations/{cid}"
        body = {"settings": {"model": "gptbg/gpt-4.1"}}
        turn = (await api.post(f"{base}/turns", json={"input": "tell me", "body": body})).json()
        await read_until(api, turn["stream_url"], deltas(5))
        crash_stack.replace_worker()

        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        assert final["message"]["parts"] == [
            {"type": "step-start"},
            {"type": "text", "text": "".join(WORDS), "state": "done"},
        ]
        assert fake_responses.calls(cid) == 1  # the model was asked once
        [response_id] = fake_responses.responses(cid)
        assert [r for r in fake_responses.retrievals() if r[0] == response_id], "never picked up"
        _, events = await read_stream(api, turn["stream_url"])
        kinds = [c["type"] for c in chunks(events)]
        assert kinds.count("reset-step") == 1 and kinds[-1] == "finish"


async def test_a_crash_after_a_tool_never_runs_the_tool_again(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("record", {"note": cid}, id="call_record"),
        reply(text(*WORDS), delay=0.05),
        reply(text(*WORDS), delay=0.05),
    )
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/helper/conversations/{cid}"
        turn = (await api.post(f"{base}/turns", json={"input": "note it"})).json()
        # Kill the worker while it streams the step after the tool.
        await read_until(api, turn["stream_url"], deltas(3))
        crash_stack.replace_worker()
        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        parts = final["message"]["parts"]
        assert [p["type"] for p in parts] == [
            "step-start",
            "tool-record",
            "step-start",
            "text",  # what the killed step said, kept
            "step-start",
            "text",  # its continuation
        ]
        assert parts[1]["output"] == f"recorded {cid}"
        assert parts[3]["text"] and "".join(WORDS).startswith(parts[3]["text"])
        assert parts[5]["text"] == "".join(WORDS)
    runs = (crash_stack.logs / "tool-runs.log").read_text().splitlines()
    mine = [line for line in runs if line.startswith(f"{cid} ")]
    # The side effect happened once, crash or not, and saw the call's stable key.
    assert mine == [f"{cid} {final['turn_id']}:call_record"]
    assert fake_model.calls(cid) == 3  # step 1, step 2 killed, its continuation


async def test_a_streaming_tool_killed_mid_stream_runs_again_and_its_result_is_kept_once(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A worker SIGKILLed while a streaming tool yields: the call runs again from its start on
    the replacement (its policy: no settled result yet), its outputs streamed again, and the
    turn keeps the one result."""
    fake_model.script(cid, tool_call("countdown", {"start": 5}, id="call_cd"), text("Up."))
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        base = f"/v1/agents/streamer/conversations/{cid}"
        turn = (await api.post(f"{base}/turns", json={"input": "count"})).json()

        def counting(got: list[dict[str, Any]]) -> bool:
            return any(c.get("output") == "4..." for c in got)

        await read_until(api, turn["stream_url"], counting)
        crash_stack.replace_worker()
        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        [part] = [p for p in final["message"]["parts"] if p["type"] == "tool-countdown"]
        assert part["output"] == "liftoff"
        assert final["message"]["parts"][-1]["text"] == "Up."
        assert fake_model.calls(cid) == 2  # the step before the tool is not asked again
        _, events = await read_stream(api, turn["stream_url"])
        finals = [
            c
            for c in chunks(events)
            if c["type"] == "tool-output-available" and not c.get("preliminary")
        ]
        assert [c["output"] for c in finals] == ["liftoff"]
    runs = Path(crash_stack.env["THINK_HOME"]) / f"countdown-{final['turn_id']}"
    assert runs.read_text().splitlines() == ["run", "run"]  # the killed run, and the last


async def test_gateway_killed_mid_stream_resume_on_another(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The stream log is the truth: any gateway serves any reconnect, without gap or repeat."""
    gateways = Stack(env=stack.env, logs=tmp_path_factory.mktemp("gateways"))
    try:
        first = gateways.start_api()
        first_url = gateways.api_url
        gateways.start_api()
        second_url = gateways.api_url
        fake_model.script(cid, reply(text(*WORDS), delay=0.05))
        seen: list[int] = []
        async with httpx.AsyncClient(base_url=first_url, timeout=60) as api:
            turn = (
                await api.post(f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "x"})
            ).json()
            stream_path = urlsplit(turn["stream_url"]).path
            async with api.stream("GET", stream_path) as response:
                buffer = ""
                async for piece in response.aiter_text():
                    buffer += piece
                    seen = [e.id for e in parse(buffer) if e.id is not None]
                    if len(seen) >= 8:
                        first.kill()  # the gateway dies under the client
                        break
        async with httpx.AsyncClient(base_url=second_url, timeout=60) as api:
            _, rest = await read_stream(api, stream_path, last_event_id=seen[-1])
            _, whole = await read_stream(api, stream_path)
        rest_ids = [e.id for e in rest if e.id is not None]
        whole_ids = [e.id for e in whole if e.id is not None]
        assert seen + rest_ids == whole_ids  # no gap, no duplicate
        assert chunks(whole)[-1]["type"] == "finish"
        streamed = "".join(c["delta"] for c in chunks(whole) if c["type"] == "text-delta")
        assert streamed == "".join(WORDS)
    finally:
        gateways.stop()


@pytest.mark.parametrize(
    ("request_fields", "admitted_as"),
    [({}, "running"), ({"concurrency": "debounce", "debounce_seconds": 0.1}, "pending")],
    ids=["started-by-its-admission", "left-to-its-first-step"],
)
async def test_a_turn_orphaned_by_a_dead_gateway_is_picked_up(
    stack: Stack,
    settings: Settings,
    api: httpx.AsyncClient,
    cid: str,
    request_fields: dict[str, Any],
    admitted_as: str,
) -> None:
    """Admitted in Postgres, never handed to Temporal (the gateway died in between): the
    workers' sweeper starts its workflow, whether its admission started the turn or not."""
    db = await open_database(settings, max_size=1)
    try:
        admission = await Store(db).admit_turn(
            tenant="default",
            agent="helper",
            conversation_id=cid,
            request=TurnRequest(messages=[UIMessage.user_text("orphan")], **request_fields),
            request_hash="x",
            idempotency_key=None,
        )
    finally:
        await db.close()
    assert admission.turn.status == admitted_as and admission.turn.awaits_workflow
    url = f"/v1/agents/helper/conversations/{cid}/turns/{admission.turn.id}"
    final = await until_terminal(api, url)
    assert final["status"] == "completed"
    assert final["message"]["parts"][-1]["text"] == "echo: orphan"


async def test_a_frozen_worker_that_wakes_up_late_changes_nothing(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Regression (found by bench/chaos.py): a worker paused past its heartbeat timeout (a long
    GC pause, a stopped VM) learns on waking that its attempt timed out; that cancellation is not
    a user's cancel and must not end the turn as `aborted`."""
    # The first attempt streams a little, then waits on the model (nothing buffered to write);
    # the second streams slowly, so the frozen worker wakes while the second is still running.
    # A frozen worker's open long polls may still take the retried workflow task (the server
    # cannot tell it is frozen), so the step can be attempted more than twice before one
    # finishes: every attempt after the first gets the same answer.
    slow = reply(text(*WORDS), delay=0.2)
    fake_model.script(cid, text("one ", "two ", "three ") + stall(30), slow, slow, slow)
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        turn = (
            await api.post(f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "x"})
        ).json()
        await read_until(api, turn["stream_url"], deltas(3))
        frozen = next(
            p for p in crash_stack.processes if p.name == "worker" and p.popen.poll() is None
        )
        frozen.popen.send_signal(signal.SIGSTOP)
        try:
            crash_stack.start_worker()  # takes the step over after the heartbeat timeout
            await asyncio.sleep(9)
        finally:
            frozen.popen.send_signal(signal.SIGCONT)
        final = await until_terminal(api, turn["status_url"])
        assert final["status"] == "completed", final
        assert final["message"]["parts"][-1]["text"] == "".join(WORDS)
        await asyncio.sleep(1)  # give the woken worker time to do anything wrong
        again = (await api.get(turn["status_url"])).json()
        assert again["status"] == "completed"
        assert again["message"] == final["message"]
    # Its attempt was superseded: expected control flow, said in lines, not tracebacks (#37).
    assert "Traceback" not in frozen.log.read_text(errors="replace")
