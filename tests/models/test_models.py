"""The model layer, end to end through the real OpenAI SDK against a real (fake) HTTP server."""

from __future__ import annotations

import json
import socket

import openai
import pytest

from think._settings import Settings
from think.exceptions import ModelError
from think.models import (
    Finish,
    ModelClient,
    ModelEvent,
    ModelRequest,
    OfflineModel,
    OpenAIModel,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    resolve_model,
)
from think.models._offline import estimate_tokens
from think.models._openai import OpenAIStreamState, _client
from think.testing import (
    FakeOpenAIServer,
    ScriptedModel,
    disconnect,
    error,
    reasoning,
    reply,
    stall,
    text,
    tool_call,
)


@pytest.fixture
def model(server: FakeOpenAIServer, pooled_clients: None) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=server.base_url, api_key="test-key")


_counter = iter(range(1_000_000))


def request(text_: str = "hi", **kwargs: object) -> ModelRequest:
    """A request in a conversation of its own, so scripts of different tests never mix."""
    metadata = {"conversation-id": f"conv-{next(_counter)}", "turn-id": "turn-1"}
    return ModelRequest.model_validate(
        {
            "model": "fake-model",
            "messages": [{"role": "user", "content": text_}],
            "metadata": metadata,
            **kwargs,
        }
    )


def cid(req: ModelRequest) -> str:
    return req.metadata["conversation-id"]


async def collect(model: ModelClient, req: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(req)]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta))


async def test_plain_text_streams_in_chunks_and_ends_with_one_finish(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request()
    server.script(cid(req), text("Hello", " there", ", world"))
    events = await collect(model, req)
    assert events[:3] == [
        TextDelta(delta="Hello"),
        TextDelta(delta=" there"),
        TextDelta(delta=", world"),
    ]
    assert [type(e) for e in events].count(Finish) == 1
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "stop"


async def test_reasoning_content_becomes_reasoning_deltas(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request()
    server.script(cid(req), reasoning("The user greets me.") + text("Hi!"))
    events = await collect(model, req)
    thought = "".join(e.delta for e in events if isinstance(e, ReasoningDelta))
    assert thought == "The user greets me."
    assert text_of(events) == "Hi!"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_text])


def chunk(delta: dict[str, object]) -> dict[str, object]:
    """A `chat.completion.chunk` as the stream hands it over: its JSON object."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def reasoning_of(*deltas: dict[str, object]) -> list[str]:
    state = OpenAIStreamState()
    return [e.delta for d in deltas for e in state.feed(chunk(d)) if isinstance(e, ReasoningDelta)]


def test_reasoning_is_read_from_every_field_servers_use() -> None:
    # vLLM < 0.11, DeepSeek, llama.cpp; newer vLLM, Ollama, OpenRouter.
    assert reasoning_of({"reasoning_content": "a"}, {"reasoning": "b"}) == ["a", "b"]
    # OpenRouter's `reasoning_details`: raw text, and OpenAI's reasoning summaries.
    details = [
        {
            "type": "reasoning.summary",
            "summary": "Compare digits.",
            "format": "openai-responses-v1",
        },
        {"type": "reasoning.encrypted", "data": "gAAAA...", "format": "openai-responses-v1"},
        {"type": "reasoning.text", "text": " 9.8 wins.", "signature": None},
    ]
    assert reasoning_of({"reasoning_details": details}) == ["Compare digits. 9.8 wins."]
    # OpenRouter repeats the blocks' text in `reasoning`: it is read once, not twice.
    assert reasoning_of({"reasoning": "Compare digits.", "reasoning_details": details[:1]}) == [
        "Compare digits."
    ]
    # Encrypted-only blocks, empty strings and nulls carry nothing to show.
    assert (
        reasoning_of(
            {"reasoning_details": details[1:2]},
            {"reasoning_content": "", "reasoning": None, "content": "x"},
            {"reasoning_details": None},
        )
        == []
    )


async def test_parallel_tool_calls_with_fragmented_arguments(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    tools = [
        ToolSpec(
            name="get_weather",
            description="Current weather",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        )
    ]
    req = request("weather?", tools=tools)
    server.script(
        cid(req),
        text("Checking.")
        + tool_call("get_weather", {"city": "Paris"}, id="call_a", fragments=4)
        + tool_call("get_weather", {"city": "Tokyo, Japan"}, id="call_b", fragments=5),
    )
    events = await collect(model, req)

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ToolCallStart(tool_call_id="call_a", tool_name="get_weather"),
        ToolCallStart(tool_call_id="call_b", tool_name="get_weather"),
    ]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) > 4  # the arguments really did arrive in fragments
    for call_id, city in [("call_a", "Paris"), ("call_b", "Tokyo, Japan")]:
        args = "".join(d.delta for d in deltas if d.tool_call_id == call_id)
        assert json.loads(args) == {"city": city}
        start = events.index(ToolCallStart(tool_call_id=call_id, tool_name="get_weather"))
        first_delta = next(
            i
            for i, e in enumerate(events)
            if isinstance(e, ToolCallDelta) and e.tool_call_id == call_id
        )
        assert start < first_delta
    assert text_of(events) == "Checking."
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "tool-calls"

    sent = server.requests(cid(req))[0]["body"]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]


async def test_usage_arrives_in_the_final_chunk(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request()
    server.script(cid(req), reply(text("ok"), usage=Usage(input_tokens=123, output_tokens=45)))
    events = await collect(model, req)
    assert events[-1] == Finish(
        finish_reason="stop", usage=Usage(input_tokens=123, output_tokens=45)
    )


@pytest.mark.parametrize(
    ("openai_reason", "ours"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool-calls"),
        ("function_call", "tool-calls"),
        ("content_filter", "content-filter"),
    ],
)
async def test_finish_reasons_are_mapped(
    server: FakeOpenAIServer, model: OpenAIModel, openai_reason: str, ours: str
) -> None:
    req = request()
    server.script(cid(req), reply(text("cut"), finish_reason=openai_reason))  # type: ignore[arg-type]
    events = await collect(model, req)
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == ours


async def test_request_carries_metadata_headers_and_streaming_options(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request("what is 2+2?")
    await collect(model, req)
    [recorded] = server.requests(cid(req))
    assert recorded["headers"]["x-think-conversation-id"] == cid(req)
    assert recorded["headers"]["x-think-turn-id"] == "turn-1"
    assert recorded["headers"]["authorization"] == "Bearer test-key"
    body = recorded["body"]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "what is 2+2?"}]
    assert "tools" not in body


@pytest.mark.parametrize(
    ("status", "retryable"), [(429, True), (500, True), (503, True), (400, False), (401, False)]
)
async def test_http_errors_map_to_model_error(
    server: FakeOpenAIServer, model: OpenAIModel, status: int, retryable: bool
) -> None:
    req = request()
    server.script(cid(req), error(status, f"provider says {status}"))
    with pytest.raises(ModelError) as caught:
        await collect(model, req)
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value)
    assert f"provider says {status}" in str(caught.value)
    assert server.calls(cid(req)) == 1  # the SDK did not retry behind Temporal's back


async def test_error_event_mid_stream_uses_its_status(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request()
    server.script(cid(req), text("partial") + error(400, "context too long"))
    with pytest.raises(ModelError) as caught:
        await collect(model, req)
    assert caught.value.retryable is False
    assert "context too long" in str(caught.value)


async def test_disconnect_mid_stream_is_retryable(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    req = request()
    server.script(cid(req), text("half an answer") + disconnect())
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as caught:
        async for event in model.stream(req):
            seen.append(event)
    assert caught.value.retryable is True
    assert text_of(seen) == "half an answer"
    assert not any(isinstance(e, Finish) for e in seen)


async def test_stalled_server_times_out_as_retryable(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    impatient = OpenAIModel("fake-model", base_url=server.base_url, api_key="k", timeout=0.2)
    req = request()
    server.script(cid(req), stall(5) + text("too late"))
    with pytest.raises(ModelError) as caught:
        await collect(impatient, req)
    assert caught.value.retryable is True


async def test_unreachable_endpoint_is_retryable(pooled_clients: None) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connection refused
        unreachable = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
        with pytest.raises(ModelError) as caught:
            await collect(unreachable, request())
    assert caught.value.retryable is True
    assert "unreachable" in str(caught.value)


async def test_one_sdk_client_per_endpoint_is_reused(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    assert _client(server.base_url, "a") is _client(server.base_url, "a")
    assert _client(server.base_url, "a") is not _client(server.base_url, "b")


async def test_fake_server_echoes_then_default_then_conversation_script(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    echo_req = request("ping")
    assert text_of(await collect(model, echo_req)) == "echo: ping"

    mine, other = request(), request()
    server.script(cid(mine), text("scripted"))
    server.script_default(text("default"))
    assert text_of(await collect(model, other)) == "default"
    assert text_of(await collect(model, mine)) == "scripted"
    assert text_of(await collect(model, mine)) == "echo: hi"
    assert server.pending(cid(mine)) == 0 and server.pending() == 0
    assert server.calls(cid(mine)) == 2


async def test_fake_server_speaks_non_streaming_and_lists_models(
    server: FakeOpenAIServer,
) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0) as sdk:
        server.script("plain", text("Sure.") + tool_call("lookup", {"q": "x"}, id="call_1"))
        completion = await sdk.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-think-conversation-id": "plain"},
        )
        models = await sdk.models.list()
    choice = completion.choices[0]
    assert choice.message.content == "Sure."
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.id == "call_1" and call.type == "function"
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "x"}
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    assert [m.id for m in models.data] == ["fake-model"]


async def test_offline_model_says_it_is_offline() -> None:
    events = await collect(OfflineModel(), request("Hello, model"))
    reply_text = text_of(events)
    assert reply_text.startswith("This is Think's offline model")
    assert "OPENAI_BASE_URL" in reply_text
    assert reply_text.endswith("You said: Hello, model")
    assert sum(isinstance(e, TextDelta) for e in events) > 5
    assert not any(isinstance(e, ToolCallStart) for e in events)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "stop"
    assert finish.usage.input_tokens > 0 and finish.usage.output_tokens > 0


def test_resolve_model_picks_the_right_client() -> None:
    scripted = ScriptedModel()
    assert resolve_model(scripted, Settings()) is scripted
    assert isinstance(resolve_model("gpt-4o", Settings()), OfflineModel)

    local = resolve_model("qwen", Settings(openai_base_url="http://localhost:8000/v1"))
    assert isinstance(local, OpenAIModel)
    assert (local.model, local.base_url, local.name) == (
        "qwen",
        "http://localhost:8000/v1",
        "openai:qwen",
    )

    hosted = resolve_model("openai:gpt-4o", Settings(openai_api_key="sk-test"))
    assert isinstance(hosted, OpenAIModel)
    assert (hosted.model, hosted.base_url) == ("gpt-4o", "https://api.openai.com/v1")

    forced = resolve_model("offline", Settings(openai_api_key="sk-test"))
    assert isinstance(forced, OfflineModel)


async def test_scripted_model_plays_replies_in_order_and_records_requests() -> None:
    scripted = ScriptedModel(
        tool_call("add", {"a": 1, "b": 2}, id="call_add"),
        reply(text("It is 3."), usage=Usage(input_tokens=9, output_tokens=4)),
    )
    first = await collect(scripted, request("1+2?"))
    assert first[0] == ToolCallStart(tool_call_id="call_add", tool_name="add")
    args = "".join(e.delta for e in first if isinstance(e, ToolCallDelta))
    assert json.loads(args) == {"a": 1, "b": 2}
    assert isinstance(first[-1], Finish) and first[-1].finish_reason == "tool-calls"

    second = await collect(scripted, request("thanks"))
    assert text_of(second) == "It is 3."
    assert second[-1] == Finish(usage=Usage(input_tokens=9, output_tokens=4))

    assert text_of(await collect(scripted, request("more"))) == "echo: more"
    assert [r.messages[-1]["content"] for r in scripted.requests] == ["1+2?", "thanks", "more"]
    assert scripted.pending == 0


async def test_a_continuing_reply_says_only_what_a_kept_partial_left_unsaid(
    server: FakeOpenAIServer, model: OpenAIModel
) -> None:
    """`continues=True`: a call whose transcript ends with the answer begun (a partial kept
    after a crash) streams the rest of it, cut mid-chunk if need be, and nothing once all of
    it was said; any other transcript hears the whole reply, over HTTP as in process."""
    answer = reply(text("one ", "two ", "three "), continues=True)
    for begun, rest in [("", "one two three "), ("one tw", "o three "), ("one two three ", "")]:
        said = [{"role": "assistant", "content": begun}] if begun else []
        req = request("count")
        req = req.model_copy(update={"messages": [*req.messages, *said]})
        server.script(cid(req), answer)
        assert text_of(await collect(model, req)) == rest
        assert text_of(await collect(ScriptedModel(answer), req)) == rest
    elsewhere = request("count")
    elsewhere = elsewhere.model_copy(
        update={"messages": [*elsewhere.messages, {"role": "assistant", "content": "four"}]}
    )
    assert text_of(await collect(ScriptedModel(answer), elsewhere)) == "one two three "


async def test_scripted_model_faults_match_the_http_ones() -> None:
    scripted = ScriptedModel(error(429), error(404, "no such model"), text("a") + disconnect())
    with pytest.raises(ModelError) as rate_limited:
        await collect(scripted, request())
    assert rate_limited.value.retryable and rate_limited.value.status == 429
    with pytest.raises(ModelError) as missing:
        await collect(scripted, request())
    assert not missing.value.retryable and "no such model" in str(missing.value)
    with pytest.raises(ModelError) as dropped:
        await collect(scripted, request())
    assert dropped.value.retryable


async def test_a_server_that_keeps_no_requests_hears_a_growing_transcript_as_one_that_keeps_them(
    pooled_clients: None,
) -> None:
    """The benchmarks' scripted model (`keep=0`) parses a transcript that grew from where it
    grew: what it reports (input tokens) and echoes (the last user message) must be what the
    whole transcript gives, as it grows, when a user message arrives, and when an earlier
    message changes (a compaction, an edited system prompt)."""
    messages: list[dict[str, object]] = [{"role": "system", "content": "Be brief."}]
    steps: list[list[dict[str, object]]] = [
        [{"role": "user", "content": "first question here"}],
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "three words here"},
        ],
        [{"role": "assistant", "content": "It is 3."}, {"role": "user", "content": "and again?"}],
    ]
    with FakeOpenAIServer(keep=0) as light, FakeOpenAIServer() as whole:
        models = [
            OpenAIModel("fake-model", base_url=s.base_url, api_key="k") for s in (light, whole)
        ]

        async def heard(messages: list[dict[str, object]]) -> list[tuple[str, Usage | None]]:
            req = ModelRequest.model_validate(
                {"model": "fake-model", "messages": messages, "metadata": {"conversation-id": "g"}}
            )
            out = []
            for model in models:
                events = await collect(model, req)
                assert isinstance(events[-1], Finish)
                out.append((text_of(events), events[-1].usage))
            return out

        for more in steps:
            messages = [*messages, *more]
            got, want = await heard(messages)
            assert got == want
            assert want[1] is not None and want[1].input_tokens == estimate_tokens(messages)
        assert got[0] == "echo: and again?"
        assert "g" in light._transcripts._last  # it did hear from where the transcript grew
        messages = [{"role": "system", "content": "Be very brief now."}, *messages[1:]]
        got, want = await heard(messages)  # an earlier message changed: heard whole again
        assert got == want and want[1] is not None
        assert want[1].input_tokens == estimate_tokens(messages)
        got, want = await heard([*messages, {"role": "user", "content": "last one"}])
        assert got == want == ("echo: last one", want[1])
