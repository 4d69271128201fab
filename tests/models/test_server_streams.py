"""Stream shapes real OpenAI-compatible servers send, beyond OpenAI's own: each replayed through
the Chat Completions adapter (the real SDK against a real HTTP server speaking the shape), and
the ones that changed what a turn stores, through a whole turn.

- Parallel tool calls sent whole, one a chunk, all at `index` 0, each with its own id: current
  Ollama with some models, some vLLM and SGLang builds. Read as one call before, with
  `{...}{...}` arguments, and neither tool ran.
- Reasoning inside `<think>…</think>` at the start of `content`: Groq's default raw format,
  older Ollama, reasoning models served without a reasoning parser. Stored as the answer's
  text before, and sent back to the model as what it said.
- Tool calls without `index` (some proxies), an id that comes after the first fragment, and
  whole arguments in one delta.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests._sse import chunks, read_stream
from think._settings import Settings
from think.exceptions import ConfigurationError
from think.models import (
    Finish,
    ModelEvent,
    ModelRequest,
    OpenAIModel,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from think.models._openai import OpenAIStreamState
from think.models._think_tags import ThinkTagSplitter
from think.streaming import MessageBuilder
from think.testing import FakeOpenAIServer, raw_delta, reply, text

# -- the shapes, as the deltas a server streams ---------------------------------------------------

OLLAMA_PARALLEL = [
    {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_one",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
            }
        ]
    },
    {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_two",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 30, "b": 12}'},
            }
        ]
    },
]
"""Two calls, each whole in one chunk, both at `index` 0."""


def _fragments(call_id: str | None, name: str, arguments: str, index: int | None) -> list[Any]:
    """A call as most servers stream it: the id and name first, then the arguments in pieces
    (no `index` key at all when `index` is None)."""
    at = {} if index is None else {"index": index}
    head = {**at, **({"id": call_id} if call_id else {}), "function": {"name": name}}
    pieces = [arguments[i : i + 5] for i in range(0, len(arguments), 5)]
    return [{"tool_calls": [head]}] + [
        {"tool_calls": [{**at, "function": {"arguments": piece}}]} for piece in pieces
    ]


NO_INDEX = _fragments("call_a", "add", '{"a": 4, "b": 5}', None) + _fragments(
    "call_b", "add", '{"a": 6}', None
)
"""Two calls, fragmented, with no `index`: each fragment after the first has neither id nor
index, so it belongs to the call before it."""

LATE_ID = [
    {"tool_calls": [{"index": 0, "function": {"arguments": ""}}]},
    {"tool_calls": [{"index": 0, "id": "call_late", "function": {"name": "add"}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 7}'}}]},
]
"""The first fragment of a call carries neither id nor name."""


def events_of(deltas: list[Any], **state: Any) -> list[ModelEvent]:
    stream = OpenAIStreamState(**state)
    events = [
        event
        for delta in deltas
        for event in stream.feed({"choices": [{"index": 0, "delta": delta}]})
    ]
    return events + stream.flush()


def calls_of(events: list[ModelEvent]) -> dict[str, tuple[str, Any]]:
    """Each call's name and parsed arguments, by id, in the order started."""
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    return {
        s.tool_call_id: (
            s.tool_name,
            json.loads(
                "".join(
                    e.delta
                    for e in events
                    if isinstance(e, ToolCallDelta) and e.tool_call_id == s.tool_call_id
                )
            ),
        )
        for s in starts
    }


def split(events: list[ModelEvent]) -> tuple[str, str]:
    """(reasoning, text) of a stream's events."""
    return (
        "".join(e.delta for e in events if isinstance(e, ReasoningDelta)),
        "".join(e.delta for e in events if isinstance(e, TextDelta)),
    )


def test_parallel_calls_at_one_index_are_separate_calls() -> None:
    assert calls_of(events_of(OLLAMA_PARALLEL)) == {
        "call_one": ("add", {"a": 1, "b": 2}),
        "call_two": ("add", {"a": 30, "b": 12}),
    }


def test_fragments_without_an_index_join_the_call_before_them() -> None:
    assert calls_of(events_of(NO_INDEX)) == {
        "call_a": ("add", {"a": 4, "b": 5}),
        "call_b": ("add", {"a": 6}),
    }


def test_an_id_after_the_first_fragment_names_the_call() -> None:
    assert calls_of(events_of(LATE_ID)) == {"call_late": ("add", {"a": 7})}


def test_fragments_that_repeat_their_id_stay_one_call() -> None:
    # llama.cpp and others send the id (and some the name) again with every fragment.
    deltas = [
        {"tool_calls": [{"index": 0, "id": "call_r", "function": {"name": "add"}}]},
        {"tool_calls": [{"index": 0, "id": "call_r", "function": {"arguments": '{"a"'}}]},
        {"tool_calls": [{"index": 0, "id": "call_r", "function": {"arguments": ": 2}"}}]},
    ]
    assert calls_of(events_of(deltas)) == {"call_r": ("add", {"a": 2})}


ANSWER = "<think>The user greets me.\nA short answer.</think>\n\nHello there!"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 9, len(ANSWER)])
def test_a_leading_think_block_is_reasoning_however_it_is_split(size: int) -> None:
    pieces = [{"content": ANSWER[i : i + size]} for i in range(0, len(ANSWER), size)]
    events = events_of(pieces)
    assert split(events) == ("The user greets me.\nA short answer.", "Hello there!")
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_text])


def test_every_split_point_of_the_tags_gives_the_same_answer() -> None:
    text_ = "  <think>a<b</think>c</think>d"
    for cut in range(len(text_) + 1):
        splitter = ThinkTagSplitter()
        events = [*splitter.feed(text_[:cut]), *splitter.feed(text_[cut:]), *splitter.flush()]
        assert split(events) == ("a<b", "c</think>d"), cut


@pytest.mark.parametrize(
    "answer",
    [
        "Use <think> tags like this: <think>x</think>.",  # a tag later in the text
        "<b>Bold</b> claim.",  # a tag that is not <think>
        "<thinking>is not the tag</thinking>",
        "",
    ],
)
def test_text_that_does_not_open_with_the_block_is_text(answer: str) -> None:
    events = events_of([{"content": answer[:3]}, {"content": answer[3:]}])
    assert split(events) == ("", answer)


def test_a_block_never_closed_is_reasoning() -> None:
    # A reasoning model cut off by its length limit while it thinks.
    assert split(events_of([{"content": "<think>Still weigh"}, {"content": "ing it </th"}])) == (
        "Still weighing it </th",
        "",
    )


def test_think_tags_off_keeps_the_text_as_sent() -> None:
    assert split(events_of([{"content": ANSWER}], think_tags="off")) == ("", ANSWER)


def test_the_endpoint_option_is_read_and_checked() -> None:
    env = {"THINK_MODEL_ENDPOINTS": json.dumps({"groq": {"think_tags": "off"}})}
    assert Settings.from_env(env).model_endpoints["groq"].think_tags == "off"
    bad = {"THINK_MODEL_ENDPOINTS": json.dumps({"groq": {"think_tags": "sometimes"}})}
    with pytest.raises(ConfigurationError, match="think_tags"):
        Settings.from_env(bad)


# -- through the adapter: the real SDK against a server that streams the shape -------------------


async def through_adapter(
    server: FakeOpenAIServer, cid: str, deltas: list[Any], **options: Any
) -> list[ModelEvent]:
    server.script(cid, reply(*(raw_delta(d) for d in deltas), finish_reason="tool_calls"))
    model = OpenAIModel("fake-model", base_url=server.base_url, **options)
    request = ModelRequest.model_validate(
        {
            "model": "fake-model",
            "messages": [{"role": "user", "content": "go"}],
            "metadata": {"conversation-id": cid, "turn-id": "t"},
        }
    )
    return [event async for event in model.stream(request)]


async def test_the_adapter_reads_each_shape(server: FakeOpenAIServer, pooled_clients: None) -> None:
    for cid, deltas, calls in [
        ("ollama", OLLAMA_PARALLEL, {"call_one", "call_two"}),
        ("no-index", NO_INDEX, {"call_a", "call_b"}),
        ("late-id", LATE_ID, {"call_late"}),
    ]:
        events = await through_adapter(server, cid, deltas)
        assert set(calls_of(events)) == calls, cid
        assert isinstance(events[-1], Finish) and events[-1].finish_reason == "tool-calls"
    pieces = [{"content": ANSWER[i : i + 4]} for i in range(0, len(ANSWER), 4)]
    assert split(await through_adapter(server, "think", pieces)) == (
        "The user greets me.\nA short answer.",
        "Hello there!",
    )
    kept = await through_adapter(server, "think-off", pieces, think_tags="off")
    assert split(kept) == ("", ANSWER)


# -- whole turns -----------------------------------------------------------------------------------


def path(cid: str) -> str:
    return f"/v1/agents/helper/conversations/{cid}"


async def completed(api: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    body = {"input": "go", "mode": "wait", "wait_timeout": 15}
    response = await api.post(f"{path(cid)}/turns", json=body)
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    # What is stored is what the stream rebuilds.
    _, events = await read_stream(api, turn["stream_url"])
    builder = MessageBuilder()
    for chunk in chunks(events):
        builder.apply(chunk)
    assert builder.message == turn["message"]
    return turn


async def test_parallel_calls_at_one_index_each_run_once(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        reply(*(raw_delta(d) for d in OLLAMA_PARALLEL), finish_reason="tool_calls"),
        text("3 and 42."),
    )
    turn = await completed(api, cid)
    tools = [p for p in turn["message"]["parts"] if p["type"] == "tool-add"]
    assert [(p["toolCallId"], p["input"], p["output"]) for p in tools] == [
        ("call_one", {"a": 1, "b": 2}, 3),
        ("call_two", {"a": 30, "b": 12}, 42),
    ]
    sent = fake_model.requests(cid)[-1]["body"]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_one", "call_two"]
    assert fake_model.calls(cid) == 2


async def test_a_leading_think_block_is_stored_as_reasoning(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("<thi", "nk>Greeting.</th", "ink>\n\nHello!"))
    turn = await completed(api, cid)
    parts = [(p["type"], p["text"]) for p in turn["message"]["parts"] if "text" in p]
    assert parts == [("reasoning", "Greeting."), ("text", "Hello!")]
    # The next step is not told the reasoning was part of the answer.
    fake_model.script(cid, text("Again."))
    await completed(api, cid)
    sent = fake_model.requests(cid)[-1]["body"]["messages"]
    answers = [m["content"] for m in sent if m["role"] == "assistant"]
    assert answers and all("<think>" not in str(a) and "Greeting" not in str(a) for a in answers)
