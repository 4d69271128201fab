"""OpenAI's Responses API behind the one `ModelClient` interface: the transcript as input items
(reasoning items handed back, encrypted, before what they led to), call settings in its terms,
its event stream read into the turn's, usage with cached and reasoning tokens, its failures told
apart, and background mode (a dropped stream picked up where it was, a cancelled turn's response
stopped); whole turns through the stack against `FakeResponsesServer`, a real HTTP server
speaking the API, driven by the official SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from tests._sse import chunks, deltas, read_stream, read_until
from tests._turn_helpers import until_status, wait_turn
from think.exceptions import ModelError
from think.models import (
    EncodedMessages,
    ModelRequest,
    ModelSettings,
    ResponsesModel,
    ResponsesStreamState,
    ToolSpec,
    Usage,
    close_openai_clients,
)
from think.models._chat_body import chat_only
from think.models._responses import responses_settings, to_responses_input
from think.testing import (
    FakeOpenAIServer,
    FakeResponsesServer,
    disconnect,
    error,
    reasoning,
    reply,
    text,
    tool_call,
)
from think.testing._responses_rules import Refused, check, seal

ADD = ToolSpec(name="add", parameters={"type": "object", "properties": {}})

# -- the request -------------------------------------------------------------------------------


def _loop(reasoning_items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+2? and 3+4?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_items": reasoning_items,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": "7"},
    ]


def test_a_tool_loop_becomes_input_items_with_its_reasoning_before_the_calls() -> None:
    sealed = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": seal("rs_1")}
    items = to_responses_input(_loop([sealed]), stored=False)
    assert [i.get("type") or i["role"] for i in items] == [
        "system",
        "user",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert items[3] == {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}
    assert items[5] == {"type": "function_call_output", "call_id": "c1", "output": "3"}
    check({"model": "o4-mini", "input": items, "store": False})  # as the API would take it
    # Reasoning the provider did not keep, and has no encrypted content for, cannot go back:
    # it would be refused (404), so it is left out.
    bare = {"type": "reasoning", "id": "rs_2", "summary": []}
    assert "reasoning" not in [
        i.get("type") for i in to_responses_input(_loop([bare]), stored=False)
    ]
    check({"model": "o4-mini", "input": to_responses_input(_loop([bare]), stored=True)})
    kept = to_responses_input(_loop([bare]), stored=True)
    with pytest.raises(Refused, match="not persisted") as refused:
        check({"model": "o4-mini", "store": False, "input": kept})
    assert refused.value.status == 404


def test_call_settings_in_the_responses_apis_terms() -> None:
    settings = ModelSettings(
        temperature=0.3,
        max_output_tokens=500,
        tool_choice="add",
        parallel_tool_calls=False,
        reasoning_effort="high",
        provider_options={"service_tier": "flex"},
    )
    assert responses_settings(settings, [ADD], "o4-mini") == {
        "temperature": 0.3,
        "max_output_tokens": 500,
        "tool_choice": {"type": "function", "name": "add"},
        "parallel_tool_calls": False,
        "reasoning": {"effort": "high", "summary": "auto"},
        "service_tier": "flex",
    }
    # A reasoning model shows its reasoning unless asked not to; another model is not asked.
    assert responses_settings(ModelSettings(), [], "gpt-5")["reasoning"] == {"summary": "auto"}
    assert "reasoning" not in responses_settings(ModelSettings(), [], "gpt-4.1")
    for unsupported in (ModelSettings(seed=7), ModelSettings(stop=["END"])):
        with pytest.raises(ModelError, match="the Responses API has no") as refused:
            responses_settings(unsupported, [], "gpt-4.1")
        assert not refused.value.retryable and refused.value.kind == "refused"


def test_the_fake_refuses_what_the_api_refuses() -> None:
    user = {"role": "user", "content": "hi"}
    with pytest.raises(Refused, match="Unknown parameter: 'seed'"):
        check({"model": "gpt-4.1", "input": [user], "seed": 1})
    loose = {"type": "function", "name": "add", "parameters": {"type": "object", "properties": {}}}
    with pytest.raises(Refused, match="additionalProperties"):
        check({"model": "gpt-4.1", "input": [user], "tools": [loose]})  # strict by default
    check({"model": "gpt-4.1", "input": [user], "tools": [{**loose, "strict": False}]})
    stray = {"type": "function_call_output", "call_id": "nope", "output": "1"}
    with pytest.raises(Refused, match="No tool call found"):
        check({"model": "gpt-4.1", "input": [user, stray]})
    alone = {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": seal("rs_9")}
    with pytest.raises(Refused, match="without its required following item"):
        check({"model": "o4-mini", "input": [user, alone, user]})
    forged = {**alone, "encrypted_content": seal("rs_other")}
    with pytest.raises(Refused, match="could not be verified"):
        check({"model": "o4-mini", "input": [user, forged]})
    with pytest.raises(Refused, match="not supported with this model"):
        check({"model": "gpt-4.1", "input": [user], "include": ["reasoning.encrypted_content"]})
    with pytest.raises(Refused, match="requires `store`"):
        check({"model": "gpt-4.1", "input": [user], "background": True, "store": False})


async def test_arguments_sent_only_whole_and_a_failed_response() -> None:
    """The stream read event by event: a call whose arguments come only in its finished item,
    a summary in two paragraphs, and a response that fails mid-stream."""
    with FakeResponsesServer() as fake:
        model = ResponsesModel("o4-mini", base_url=fake.base_url, api_key="k")
        fake.script("c1", text("half") + error(500, "The server had an error"))
        request = ModelRequest(
            model="x",
            messages=[{"role": "user", "content": "go"}],
            metadata={"conversation-id": "c1"},
        )
        with pytest.raises(ModelError, match="HTTP 500: The server had an error") as failed:
            async for _ in model.stream(request):
                pass
        assert failed.value.retryable and failed.value.kind == "server"
        state = ResponsesStreamState()
        found = [
            *state.feed(
                {
                    "type": "response.output_item.added",
                    "item": {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "add",
                        "arguments": "",
                    },
                }
            ),
            *state.feed(
                {
                    "type": "response.output_item.done",
                    "item": {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_1",
                        "name": "add",
                        "arguments": '{"a":1}',
                    },
                }
            ),
            *state.feed({"type": "response.reasoning_summary_part.added", "summary_index": 1}),
        ]
        await close_openai_clients()
        assert [(e.type, getattr(e, "delta", None)) for e in found] == [
            ("tool-call-start", None),
            ("tool-call-delta", '{"a":1}'),
            ("reasoning", "\n\n"),
        ]


# -- whole turns -------------------------------------------------------------------------------

GPT = "gpt/o4-mini"
BACKGROUND = "gptbg/gpt-4.1"


async def gpt_turn(
    api: httpx.AsyncClient, cid: str, settings: dict[str, Any] | None = None, model: str = GPT
) -> dict[str, Any]:
    body = {"settings": {"model": model, **(settings or {})}}
    return await wait_turn(api, "switchable", cid, "go", body=body, wait_timeout=30)


async def test_a_plain_answer_with_settings_and_the_key(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(cid, text("Hello ", "from GPT."))
    done = await gpt_turn(api, cid, {"temperature": 0.2, "max_output_tokens": 300})
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "Hello from GPT."
    sent = fake_responses.requests(cid)[0]
    assert sent["headers"]["authorization"] == "Bearer sk-openai-test"
    body = sent["body"]
    assert body["model"] == "o4-mini" and body["store"] is False
    assert body["temperature"] == 0.2 and body["max_output_tokens"] == 300
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"][0] == {"role": "system", "content": "You are a test agent."}
    assert body["input"][-1] == {"role": "user", "content": "go"}


async def test_parallel_tools_then_the_answer_with_usage_and_cost(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(
        cid,
        reply(
            tool_call("add", {"a": 1, "b": 2}, id="call_1")
            + tool_call("add", {"a": 3, "b": 4}, id="call_2"),
            usage=Usage(input_tokens=1_000, output_tokens=40, reasoning_tokens=30),
        ),
        reply(
            text("3 and 7."),
            usage=Usage(input_tokens=1_100, cached_input_tokens=900, output_tokens=10),
        ),
    )
    done = await gpt_turn(api, cid)
    assert done["status"] == "completed", done
    tools = [p for p in done["message"]["parts"] if p["type"] == "tool-add"]
    assert [(t["toolCallId"], t["output"]) for t in tools] == [("call_1", 3), ("call_2", 7)]
    second = fake_responses.requests(cid)[1]["body"]["input"]
    assert [i.get("type") for i in second[-4:]] == [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    usage = done["usage"]
    assert usage["input_tokens"] == 2_100 and usage["output_tokens"] == 50
    assert usage["cached_input_tokens"] == 900 and usage["reasoning_tokens"] == 30
    assert usage["models"] == [GPT]
    assert usage["cost"] is not None and usage["cost"] > 0  # OpenAI's published prices


async def test_reasoning_is_handed_back_encrypted_before_the_calls_it_led_to(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    """With `store` off the provider keeps nothing: the reasoning item goes back with its
    encrypted content, before the call, on the next step and on the next turn."""
    fake_responses.script(
        cid,
        reasoning("I should ", "add.") + tool_call("add", {"a": 1, "b": 2}, id="call_r"),
        text("3."),
        text("Still 3."),
    )
    done = await gpt_turn(api, cid, {"reasoning_effort": "low"})
    assert done["status"] == "completed", done
    thought = next(p for p in done["message"]["parts"] if p["type"] == "reasoning")
    assert thought["text"] == "I should add."
    item_id = thought["providerMetadata"]["openai"]["itemId"]
    assert thought["providerMetadata"]["openai"]["reasoningEncryptedContent"] == seal(item_id)
    sent = fake_responses.requests(cid)
    assert sent[0]["body"]["reasoning"] == {"effort": "low", "summary": "auto"}
    handed = sent[1]["body"]["input"]
    at = next(i for i, item in enumerate(handed) if item.get("type") == "reasoning")
    assert handed[at] == {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": "I should add."}],
        "encrypted_content": seal(item_id),
    }
    assert handed[at + 1]["type"] == "function_call"
    again = await gpt_turn(api, cid)
    assert again["status"] == "completed", again
    assert any(i.get("id") == item_id for i in fake_responses.requests(cid)[2]["body"]["input"])


async def test_structured_output_natively(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    fake_responses.script(cid, text('{"city": "Paris"}'))
    done = await gpt_turn(api, cid, {"output": schema})
    assert done["status"] == "completed", done
    assert done["output"] == {"city": "Paris"}
    sent = fake_responses.requests(cid)[0]["body"]
    assert sent["text"]["format"]["type"] == "json_schema"
    assert sent["text"]["format"]["schema"]["properties"] == schema["properties"]


async def test_a_refused_key_names_the_variable_never_the_key(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(cid, error(401, "Incorrect API key provided"))
    done = await gpt_turn(api, cid)
    assert done["status"] == "error", done
    assert "refused the API key for model o4-mini" in done["error"]
    assert "THINK_TEST_OPENAI_KEY" in done["error"] and "sk-openai-test" not in done["error"]


async def test_unsupported_settings_end_the_turn_before_any_request(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    done = await gpt_turn(api, cid, {"seed": 7})
    assert done["status"] == "error", done
    assert "the Responses API has no seed" in done["error"]
    assert fake_responses.calls(cid) == 0


# -- background mode ---------------------------------------------------------------------------


async def test_a_dropped_stream_is_picked_up_where_it_was(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    """The connection drops mid-answer; the response goes on at the provider, and the step
    streams it again from after the last event it read: one request, no reset, no repeat."""
    fake_responses.script(cid, text("one ", "two ") + disconnect() + text("three."))
    done = await gpt_turn(api, cid, model=BACKGROUND)
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "one two three."
    assert fake_responses.calls(cid) == 1
    [sent] = fake_responses.requests(cid)
    assert sent["body"]["background"] is True and sent["body"]["store"] is True
    [response_id] = fake_responses.responses(cid)
    [(_, after)] = [r for r in fake_responses.retrievals() if r[0] == response_id]
    assert after is not None and after > 0  # from where the dropped stream was, not the start
    assert fake_responses.status(response_id) == "completed"
    _, events = await read_stream(api, done["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    assert "reset-step" not in kinds
    assert (
        "".join(c["delta"] for c in chunks(events) if c["type"] == "text-delta") == "one two three."
    )


async def test_a_cancelled_turn_stops_its_background_response(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(cid, reply(text(*[f"w{i} " for i in range(60)]), delay=0.05))
    body = {"settings": {"model": BACKGROUND}}
    url = f"/v1/agents/switchable/conversations/{cid}/turns"
    turn = (await api.post(url, json={"input": "talk", "body": body})).json()
    await asyncio.wait_for(read_until(api, turn["stream_url"], deltas(3)), timeout=30)
    cancelled = await api.post(f"{turn['status_url']}/cancel")
    assert cancelled.status_code in (200, 202), cancelled.text
    done = await until_status(api, turn["status_url"], {"aborted"})
    assert done["status"] == "aborted", done
    [sent] = fake_responses.requests(cid)
    assert sent["body"]["background"] is True
    [response_id] = fake_responses.responses(cid)
    deadline = asyncio.get_running_loop().time() + 10
    while fake_responses.status(response_id) != "cancelled":
        assert asyncio.get_running_loop().time() < deadline, fake_responses.status(response_id)
        await asyncio.sleep(0.1)


def test_chat_completions_never_sees_the_other_adapters_fields() -> None:
    plain = {"role": "user", "content": "hi"}
    kept = {"role": "assistant", "content": "a", "reasoning_items": [{"id": "rs_1"}]}
    signed = {"role": "assistant", "content": "b", "thinking_blocks": [{"signature": "s"}]}
    messages = [plain, kept, plain, signed]
    # The encoded run holds one: it is dropped, and every message goes out stripped.
    run = EncodedMessages(0, 2, orjson.dumps(plain) + b"," + orjson.dumps(kept))
    sent, encoded = chat_only(messages, run)
    assert encoded is None
    assert sent == [
        plain,
        {"role": "assistant", "content": "a"},
        plain,
        {"role": "assistant", "content": "b"},
    ]
    assert messages[1] is kept and "reasoning_items" in kept  # the caller's are not changed
    # A clean encoded run is kept; only the messages after it are looked at.
    clean = EncodedMessages(0, 1, orjson.dumps(plain))
    sent, encoded = chat_only([plain, signed], clean)
    assert encoded is clean and sent == [plain, {"role": "assistant", "content": "b"}]
    untouched = [plain, plain]
    assert chat_only(untouched, None)[0] is untouched


async def test_a_conversation_moved_to_chat_completions_sends_no_reasoning_items(
    api: httpx.AsyncClient,
    fake_responses: FakeResponsesServer,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_responses.script(cid, reasoning("Hmm.") + text("First."))
    first = await gpt_turn(api, cid, {"reasoning_effort": "low"})
    assert first["status"] == "completed", first
    fake_model.script(cid, text("Second."))
    second = await wait_turn(api, "switchable", cid, "again", wait_timeout=30)
    assert second["status"] == "completed", second
    [sent] = fake_model.requests(cid)
    answered = [m for m in sent["body"]["messages"] if m["role"] == "assistant"]
    assert answered and all(set(m) <= {"role", "content", "tool_calls"} for m in answered)
