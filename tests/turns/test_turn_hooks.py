"""Turn hooks on a real worker: before_turn, before_step, on_chunk, on_step_finish,
on_chat_response and on_chat_error (the `hooks` agent in tests/agents.py logs each call)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests._logs import hook_calls
from tests._sse import chunks, finished, read_stream
from tests._stack import Stack
from tests._turn_helpers import wait_turn
from tests.agents import Verdict, shout
from think import ThinkService, TurnConfig
from think.agent._turn_hooks import StoredTurnConfig
from think.testing import FakeOpenAIServer, error, reasoning, reply, stall, text, tool_call

BASE = "/v1/agents/hooks/conversations"


def sent_body(fake_model: FakeOpenAIServer, cid: str, i: int) -> dict[str, Any]:
    """The whole body of the model's `i`-th request for the conversation."""
    body: dict[str, Any] = fake_model.requests(cid)[i]["body"]
    return body


async def test_before_turn_overrides_system_tools_and_steps(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(
        cid, tool_call("add", {"a": 1, "b": 2}, id="c1"), tool_call("add", {"a": 3}, id="c2")
    )
    body = {"persona": "pirate", "tools": ["add"], "max_steps": 2}
    turn = await wait_turn(api, "hooks", cid, body=body)
    assert turn["status"] == "completed", turn
    first, second = sent_body(fake_model, cid, 0), sent_body(fake_model, cid, 1)
    assert first["messages"][0] == {
        "role": "system",
        "content": "You are a test agent. Speak like a pirate.",
    }
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    # before_step changed the second step's system prompt and took its tools away.
    assert second["messages"][0] == {"role": "system", "content": "Now answer briefly."}
    assert "tools" not in second or second["tools"] == []
    assert fake_model.calls(cid) == 2  # max_steps=2 from before_turn

    [before] = await hook_calls(stack, cid, "before_turn")
    ctx = before["ctx"]
    assert ctx["body"] == body and ctx["continuation"] is False
    assert ctx["system"] == "You are a test agent."
    assert ctx["messages"] == [{"role": "user", "content": "q"}]
    assert set(ctx["tools"]) == {"get_weather", "add", "explode", "record", "slow"}
    steps = await hook_calls(stack, cid, "before_step", at_least=2)
    assert [s["step"] for s in steps] == [0, 1]
    [previous] = steps[1]["previous"]
    assert previous["tool_calls"][0]["output"] == 3
    assert previous["input_tokens"] > 0


async def test_step_finish_chunk_and_response_hooks(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, text(cid) + tool_call("add", {"a": 2, "b": 2}), text("4."))
    turn = await wait_turn(api, "hooks", cid)
    assert turn["status"] == "completed"
    finished = await hook_calls(stack, cid, "on_step_finish", at_least=2)
    assert [(f["step"], f["text"]) for f in finished] == [(0, cid), (1, "4.")]
    assert finished[0]["tool_calls"][0]["output"] == 4
    assert finished[0]["finish_reason"] == "tool-calls"
    assert finished[1]["input_tokens"] > 0

    [response] = await hook_calls(stack, cid, "on_chat_response")
    assert response["status"] == "completed" and response["turn_id"] == turn["turn_id"]
    assert response["message"]["id"] == turn["message_id"]
    assert response["usage"]["input_tokens"] == turn["usage"]["input_tokens"]
    assert len(response["usage"]["steps"]) == 2
    # Usage per step adds up to the turn's, as GET …/turns/{id} shows it.
    usage = (await api.get(turn["status_url"])).json()["usage"]
    for key in ("input_tokens", "output_tokens"):
        assert usage[key] == sum(s[key] for s in usage["steps"]) > 0
    assert [s["finish_reason"] for s in usage["steps"]] == ["tool-calls", "stop"]
    assert {s["model"] for s in usage["steps"]} == {"openai:scripted-model"}

    # on_chunk saw exactly the first step's chunks, as streamed (the hook logs them under the
    # step's text, which is the conversation id here).
    [seen] = await hook_calls(stack, cid, "on_chunk")
    _, events = await read_stream(api, turn["stream_url"])
    streamed = chunks(events)
    first_step = streamed[1 : streamed.index({"type": "finish-step"}) + 1]
    assert seen["chunks"] == first_step


async def test_stall_timeout_and_budget_per_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, stall(30), text("recovered"))
    started = time.monotonic()
    turn = await wait_turn(api, "hooks", cid, body={"stall": 0.5})
    assert turn["status"] == "completed", turn
    assert time.monotonic() - started < 10  # with no watchdog (the default) it takes 30 s
    assert fake_model.calls(cid) == 2

    other = f"{cid}-b"
    fake_model.script(other, tool_call("add", {"a": 1, "b": 1}), text("never"))
    turn = await wait_turn(api, "hooks", other, body={"budget_tokens": 1})
    assert turn["status"] == "interrupted"
    assert turn["error"].startswith("token budget spent")
    assert fake_model.calls(other) == 1


async def test_the_time_budget_cuts_a_long_step_short(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    words = [f"w{i} " for i in range(100)]
    fake_model.script(cid, reply(text(*words), delay=0.05))  # five seconds of streaming
    started = time.monotonic()
    turn = await wait_turn(api, "hooks", cid, body={"time_budget": 1.0})
    assert time.monotonic() - started < 4
    assert turn["status"] == "interrupted", turn
    assert turn["error"].startswith("time budget spent")
    kept = turn["message"]["parts"][-1]
    assert kept["type"] == "text" and kept["state"] == "done"
    assert 0 < len(kept["text"]) < len("".join(words)) and "".join(words).startswith(kept["text"])
    _, events = await read_stream(api, turn["stream_url"])
    assert finished(chunks(events)[-1]) == {"type": "finish", "finishReason": "length"}
    messages = (await api.get(f"{BASE}/{cid}/messages")).json()["messages"]
    assert messages[-1]["parts"] == turn["message"]["parts"]


async def test_tools_added_by_before_turn_run(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("shout", {"text": "hey"}, id="c1"), text("HEY"))
    turn = await wait_turn(api, "hooks", cid, body={"shout": True})
    assert turn["status"] == "completed", turn
    part = next(p for p in turn["message"]["parts"] if p.get("toolCallId") == "c1")
    assert part["output"] == "HEY"


async def test_on_chat_error_maps_what_the_client_sees(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, error(400, "unsupported parameter: secret-sauce"))
    turn = await wait_turn(api, "hooks", cid)
    assert turn["status"] == "error"
    assert turn["error"] == "Sorry, the model refused (fatal)."
    _, events = await read_stream(api, turn["stream_url"])
    assert chunks(events)[-1] == {"type": "error", "errorText": turn["error"]}
    [call] = await hook_calls(stack, cid, "on_chat_error")
    assert "secret-sauce" in call["error"]  # the hook sees the real error
    assert call["ctx"]["stage"] == "model" and call["ctx"]["user_message_persisted"] is True


async def test_on_chat_error_runs_after_the_partial_answer_is_stored(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """The spec: "the partial assistant message (if any) is persisted before this hook fires".
    It ran before: the hook's conversation held no answer yet."""
    fake_model.script(cid, text("Half an ", "answer") + error(400, "the stream broke off"))
    turn = await wait_turn(api, "hooks", cid)
    assert turn["status"] == "error"
    [call] = await hook_calls(stack, cid, "on_chat_error")
    assert call["ctx"]["partial_message_persisted"] is True
    assert call["stored"] == ["Half an answer"]
    stored = (await api.get(f"/v1/agents/hooks/conversations/{cid}/messages")).json()
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]  # stored once


async def test_a_failing_hook_never_leaks_its_exception_text(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, text("never"))
    turn = await wait_turn(api, "hooks", cid, body={"explode": True})
    assert turn["status"] == "error"
    assert "secret internal detail" not in turn["error"]
    assert "before_turn" in turn["error"] and turn["turn_id"] in turn["error"]
    assert fake_model.calls(cid) == 0
    [call] = await hook_calls(stack, cid, "on_chat_error")
    assert call["ctx"]["stage"] == "before_turn"


async def test_send_reasoning_false_keeps_reasoning_in_storage_only(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reasoning("secret plan") + text("Answer."))
    url = f"/v1/agents/quiet_reasoner/conversations/{cid}/turns"
    turn = (await api.post(url, json={"input": "q", "mode": "wait"})).json()
    assert turn["status"] == "completed"
    assert [p["type"] for p in turn["message"]["parts"]] == ["step-start", "reasoning", "text"]
    _, events = await read_stream(api, turn["stream_url"])
    assert not [c for c in chunks(events) if c["type"].startswith("reasoning")]


async def test_structured_output_native(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text('{"severity": "high", ', '"reason": "smoke"}'))
    turn = await wait_turn(api, "hooks", cid, body={"verdict": True})
    assert turn["status"] == "completed", turn
    assert turn["output"] == {"severity": "high", "reason": "smoke"}
    fetched = (await api.get(turn["status_url"])).json()
    assert fetched["output"] == turn["output"]
    response_format = sent_body(fake_model, cid, 0)["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Verdict"
    assert response_format["json_schema"]["schema"]["properties"]["severity"]["enum"] == [
        "low",
        "high",
    ]


async def test_structured_output_through_a_final_answer_tool(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """An endpoint without native structured output: the answer is a call of an internal tool,
    which never shows as a tool call."""
    answer = {"severity": "low", "reason": "fine"}
    fake_model.script(cid, tool_call("final_answer", answer, id="call_answer"))
    body = {"verdict": True, "model": "plain/scripted-model"}
    turn = await wait_turn(api, "hooks", cid, body=body)
    assert turn["status"] == "completed", turn
    assert turn["output"] == answer
    assert [p["type"] for p in turn["message"]["parts"]] == ["step-start", "text"]
    assert json.loads(turn["message"]["parts"][1]["text"]) == answer
    request = sent_body(fake_model, cid, 0)
    assert "response_format" not in request
    assert "final_answer" in [t["function"]["name"] for t in request["tools"]]
    _, events = await read_stream(api, turn["stream_url"])
    assert not [c for c in chunks(events) if c["type"].startswith("tool-")]


async def test_an_answer_that_does_not_validate_ends_in_error(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text('{"severity": "medium"}'))
    turn = await wait_turn(api, "hooks", cid, body={"verdict": True})
    assert turn["status"] == "error"
    assert turn["error"].startswith("the answer does not match the schema")
    assert "severity" in turn["error"] and "reason" in turn["error"]
    assert turn["output"] is None
    # What the model said is kept.
    assert turn["message"]["parts"][-1]["text"] == '{"severity": "medium"}'

    other = f"{cid}-schema"
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    fake_model.script(other, text('{"n": 7}'))
    turn = await wait_turn(api, "hooks", other, body={"schema": schema})
    assert turn["status"] == "completed", turn
    assert turn["output"] == {"n": 7}


async def test_hooks_run_on_every_entry_path(
    service: ThinkService, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """The Python turn API and a continuation (no new message) run the same hooks as HTTP."""
    fake_model.script(cid, text("first"), text("continued"))
    conv = service.conversation("hooks", cid)
    result = await conv.run_turn("q", body={"persona": "poet"})
    assert result.status == "completed"
    assert sent_body(fake_model, cid, 0)["messages"][0]["content"].endswith("Speak like a poet.")
    continued = await conv.continue_last_turn(body={"persona": "judge"})
    assert continued.status == "completed", continued
    calls = await hook_calls(stack, cid, "before_turn", at_least=2)
    assert [c["ctx"]["continuation"] for c in calls] == [False, True]
    assert sent_body(fake_model, cid, 1)["messages"][0]["content"].endswith("Speak like a judge.")
    responses = await hook_calls(stack, cid, "on_chat_response", at_least=2)
    assert len(responses) == 2


def test_a_turn_config_is_stored_as_before_and_read_back_typed() -> None:
    """Issue 32: the stored form (`turns.config`) is typed (`StoredTurnConfig`) from the hook
    to the request, and is the same JSON as before, so turns stored by an older worker read
    back unchanged (tools and the output class by import path, a schema as it is)."""
    config = TurnConfig(
        system="Be brief.",
        tools=[shout],
        active_tools=["shout"],
        output=Verdict,
        max_steps=2,
        chat_stream_stall_timeout=0,
        turn_budget_seconds=5,
    )
    stored = {
        "system": "Be brief.",
        "active_tools": ["shout"],
        "max_steps": 2,
        "chat_stream_stall_timeout": 0,
        "turn_budget_seconds": 5,
        "tools": ["tests.agents:shout"],
        "output": {"class": "tests.agents:Verdict"},
    }
    assert config.stored() == stored
    read = StoredTurnConfig.read({**stored, "mcp": {"servers": []}})
    assert read.tools == ["tests.agents:shout"]
    assert read.output is not None and read.output.resolve() is Verdict
    assert read.as_json() == {**stored, "mcp": {"servers": []}}
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    with_schema = TurnConfig(output=schema).kept()
    assert with_schema.as_json() == {"output": {"schema": schema}}
    assert StoredTurnConfig.read(with_schema.as_json()).output == with_schema.output
    assert StoredTurnConfig.read(None).as_json() == {}
