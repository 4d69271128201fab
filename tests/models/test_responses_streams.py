"""Responses API streams as other servers send them, from their own source (vLLM 0.34's
`entrypoints/openai/responses`, Ollama's `openai/responses.go`, llama.cpp's `tools/server`),
replayed verbatim by `FakeResponsesServer` (`raw_events`) through the adapter, and the ones a
turn depends on through a whole turn.

What differs from OpenAI's own stream, and what each shape checks:
- vLLM: reasoning as `response.reasoning_text.delta` in a `reasoning_text` content part (no
  summary, `encrypted_content` null); a call's `id` (`fc_…`) is not its `call_id`
  (`chatcmpl-tool-…`); usage with per-turn details; a failure mid-stream closes the stream
  with no final event.
- Ollama: reasoning as summary deltas with no `reasoning_summary_part` events, its plain text
  again in `encrypted_content`; a call in four events in a row, its arguments in one delta;
  cached and reasoning tokens always 0; a failure mid-stream closes the stream too.
- llama.cpp: no `sequence_number`, no `reasoning_text.done`, no `function_call_arguments.done`,
  no `output_tokens_details`; a failure mid-stream is a frame `data: {"error": …}` with no
  event name, which the SDK raises as it reads.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests._sse import chunks, read_stream
from tests._turn_helpers import wait_turn
from tests.models.test_server_streams import calls_of
from think.exceptions import ModelError
from think.models import (
    Finish,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    ResponsesModel,
    TextDelta,
    ToolSpec,
    Usage,
)
from think.testing import FakeResponsesServer, raw_events

ADD = ToolSpec(
    name="add",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
)


def numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events as vLLM and Ollama send them: each with its `sequence_number`."""
    return [{**event, "sequence_number": i} for i, event in enumerate(events)]


def opening(response_id: str, model: str) -> list[dict[str, Any]]:
    response = {
        "id": response_id,
        "object": "response",
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
    }
    return [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
    ]


def completed(response_id: str, usage: dict[str, Any], output: list[Any]) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "output": output,
            "usage": usage,
        },
    }


def message(item_id: str, index: int, words: list[str]) -> list[dict[str, Any]]:
    """A message item as vLLM, Ollama and llama.cpp stream it (the same shape as OpenAI's)."""
    said = "".join(words)
    at = {"item_id": item_id, "output_index": index, "content_index": 0}
    part = {"type": "output_text", "text": said, "annotations": []}
    item = {"type": "message", "id": item_id, "role": "assistant", "content": [part]}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "content": [], "status": "in_progress"},
        },
        {
            "type": "response.content_part.added",
            **at,
            "part": {**part, "text": "", "logprobs": []},
        },
        *({"type": "response.output_text.delta", **at, "delta": w, "logprobs": []} for w in words),
        {"type": "response.output_text.done", **at, "text": said, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": {**item, "status": "completed"},
        },
    ]


# -- vLLM ----------------------------------------------------------------------------------------

VLLM_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {
        "cached_tokens": 16,
        "cache_write_tokens": 0,
        "input_tokens_per_turn": [],
        "cached_tokens_per_turn": [],
    },
    "output_tokens": 30,
    "output_tokens_details": {
        "reasoning_tokens": 12,
        "tool_output_tokens": 0,
        "output_tokens_per_turn": [],
        "tool_output_tokens_per_turn": [],
    },
    "total_tokens": 80,
}


def vllm_reasoning_then_call() -> list[dict[str, Any]]:
    thought = ["The user wants ", "a sum."]
    at = {"item_id": "rs_a1", "output_index": 0, "content_index": 0}
    reasoning_item = {
        "type": "reasoning",
        "id": "rs_a1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "".join(thought)}],
        "encrypted_content": None,
        "status": "completed",
    }
    call = {
        "type": "function_call",
        "id": "fc_b2",
        "call_id": "chatcmpl-tool-c3",
        "name": "add",
        "arguments": '{"a": 1, "b": 2}',
        "status": "completed",
    }
    return numbered(
        [
            *opening("resp_vllm1", "Qwen/Qwen3-8B"),
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "type": "reasoning",
                    "id": "rs_a1",
                    "summary": [],
                    "status": "in_progress",
                },
            },
            {
                "type": "response.content_part.added",
                **at,
                "part": {"text": "", "type": "reasoning_text"},
            },
            *({"type": "response.reasoning_text.delta", **at, "delta": t} for t in thought),
            {"type": "response.reasoning_text.done", **at, "text": "".join(thought)},
            {
                "type": "response.content_part.done",
                **at,
                "part": {"type": "reasoning_text", "text": "".join(thought)},
            },
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning_item},
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {**call, "arguments": "", "status": "in_progress"},
            },
            *(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": "fc_b2",
                    "output_index": 1,
                    "delta": piece,
                }
                for piece in ('{"a": 1', ', "b": 2}')
            ),
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_b2",
                "output_index": 1,
                "arguments": call["arguments"],
                "name": "add",
            },
            {"type": "response.output_item.done", "output_index": 1, "item": call},
            completed("resp_vllm1", VLLM_USAGE, [reasoning_item, call]),
        ]
    )


def vllm_text(words: list[str]) -> list[dict[str, Any]]:
    usage = {**VLLM_USAGE, "output_tokens": len(words)}
    return numbered(
        [
            *opening("resp_vllm2", "Qwen/Qwen3-8B"),
            *message("msg_d4", 0, words),
            completed("resp_vllm2", usage, []),
        ]
    )


def cut_off(words: list[str]) -> list[dict[str, Any]]:
    """vLLM's and Ollama's stream of a generation that failed: it stops, no final event."""
    return numbered([*opening("resp_cut", "m"), *message("msg_e5", 0, words)[:-3]])


# -- Ollama --------------------------------------------------------------------------------------


def ollama_reasoning_then_text() -> list[dict[str, Any]]:
    thought = ["Greet ", "back."]
    at = {"item_id": "rs_0", "output_index": 0, "summary_index": 0}
    reasoning_item = {
        "id": "rs_0",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "".join(thought)}],
        "encrypted_content": "".join(thought),  # Ollama's: the plain text again
    }
    usage = {
        "input_tokens": 20,
        "output_tokens": 9,
        "total_tokens": 29,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    return numbered(
        [
            *opening("resp_ollama1", "qwen3:8b"),
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "rs_0", "type": "reasoning", "summary": []},
            },
            *({"type": "response.reasoning_summary_text.delta", **at, "delta": t} for t in thought),
            {"type": "response.reasoning_summary_text.done", **at, "text": "".join(thought)},
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning_item},
            *message("msg_1", 1, ["Hello ", "there!"]),
            completed("resp_ollama1", usage, [reasoning_item]),
        ]
    )


def ollama_call() -> list[dict[str, Any]]:
    call = {
        "id": "fc_1_0",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_k3f9x2ab",
        "name": "add",
        "arguments": '{"a":40,"b":2}',
    }
    at = {"item_id": "fc_1_0", "output_index": 0}
    usage = {"input_tokens": 20, "output_tokens": 9, "total_tokens": 29}
    return numbered(
        [
            *opening("resp_ollama2", "qwen3:8b"),
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**call, "arguments": "", "status": "in_progress"},
            },
            {"type": "response.function_call_arguments.delta", **at, "delta": call["arguments"]},
            {"type": "response.function_call_arguments.done", **at, "arguments": call["arguments"]},
            {"type": "response.output_item.done", "output_index": 0, "item": call},
            completed("resp_ollama2", usage, [call]),
        ]
    )


# -- llama.cpp -----------------------------------------------------------------------------------

LLAMA_USAGE = {
    "input_tokens": 33,
    "output_tokens": 7,
    "total_tokens": 40,
    "input_tokens_details": {"cached_tokens": 3},
}


def llama_reasoning_then_call() -> list[dict[str, Any]]:
    """No sequence numbers, no `.done` of reasoning text or arguments."""
    base = {"id": "resp_llama1", "object": "response", "status": "in_progress"}
    reasoning_item = {
        "type": "reasoning",
        "id": "rs_q1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Add them."}],
        "encrypted_content": "",
        "status": "completed",
    }
    call = {
        "type": "function_call",
        "id": "fc_z9",
        "call_id": "call_z9",
        "name": "add",
        "arguments": '{"a":5,"b":6}',
        "status": "completed",
    }
    return [
        {"type": "response.created", "response": base},
        {"type": "response.in_progress", "response": base},
        {
            "type": "response.output_item.added",
            "item": {**reasoning_item, "content": [], "status": "in_progress"},
        },
        {"type": "response.reasoning_text.delta", "item_id": "rs_q1", "delta": "Add "},
        {"type": "response.reasoning_text.delta", "item_id": "rs_q1", "delta": "them."},
        {"type": "response.output_item.done", "item": reasoning_item},
        {
            "type": "response.output_item.added",
            "item": {**call, "arguments": "", "status": "in_progress"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_z9", "delta": '{"a":5'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_z9", "delta": ',"b":6}'},
        {"type": "response.output_item.done", "item": call},
        completed("resp_llama1", LLAMA_USAGE, [reasoning_item, call]),
    ]


def llama_failing(words: list[str]) -> list[dict[str, Any] | str]:
    """A few words, then llama.cpp's error frame (no event name), then the end."""
    base = {"id": "resp_llama2", "object": "response", "status": "in_progress"}
    error = {"code": 500, "message": "failed to decode the batch", "type": "server_error"}
    events: list[dict[str, Any] | str] = [
        {"type": "response.created", "response": base},
        *(
            {k: v for k, v in e.items() if k not in ("output_index", "content_index")}
            for e in message("msg_l1", 0, words)[:-3]
        ),
    ]
    return [*events, "data: " + json.dumps({"error": error})]


# -- through the adapter ---------------------------------------------------------------------


async def streamed(fake: FakeResponsesServer, events: list[Any], cid: str) -> list[ModelEvent]:
    """The adapter's events for a stream of `events` (within 10 s: a shape must never hang)."""
    fake.script(cid, raw_events(*events))
    model = ResponsesModel("Qwen/Qwen3-8B", base_url=fake.base_url, api_key="k")
    request = ModelRequest(
        model="x",
        messages=[{"role": "user", "content": "go"}],
        tools=[ADD],
        metadata={"conversation-id": cid},
    )

    async def read() -> list[ModelEvent]:
        return [event async for event in model.stream(request)]

    return await asyncio.wait_for(read(), timeout=10)


def said(events: list[ModelEvent]) -> tuple[str, str, dict[str, tuple[str, Any]]]:
    """The text, the reasoning and each call (name and parsed arguments, by call id)."""
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDelta))
    return text, reasoning, calls_of(events)


def reasoning_metadata(events: list[ModelEvent]) -> list[dict[str, Any]]:
    return [
        e.provider_metadata["openai"]
        for e in events
        if isinstance(e, ReasoningDelta) and e.provider_metadata
    ]


@pytest.fixture(scope="module")
def replayer() -> Any:
    with FakeResponsesServer() as fake:
        yield fake


async def test_vllm_reasoning_text_and_a_call_whose_id_is_not_its_call_id(
    replayer: FakeResponsesServer, pooled_clients: None
) -> None:
    events = await streamed(replayer, vllm_reasoning_then_call(), "vllm-1")
    assert said(events) == (
        "",
        "The user wants a sum.",
        {"chatcmpl-tool-c3": ("add", {"a": 1, "b": 2})},
    )
    assert reasoning_metadata(events) == [{"itemId": "rs_a1"}]  # null encrypted content: none
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "tool-calls"
    assert finish.usage == Usage(
        input_tokens=50, output_tokens=30, cached_input_tokens=16, reasoning_tokens=12
    )


async def test_ollama_reasoning_as_a_summary_and_a_call_in_one_delta(
    replayer: FakeResponsesServer, pooled_clients: None
) -> None:
    events = await streamed(replayer, ollama_reasoning_then_text(), "ollama-1")
    assert said(events) == ("Hello there!", "Greet back.", {})
    # Its "encrypted" content is the thinking text, which it reads back as such.
    assert reasoning_metadata(events) == [
        {"itemId": "rs_0", "reasoningEncryptedContent": "Greet back."}
    ]
    assert events[-1] == Finish(finish_reason="stop", usage=Usage(input_tokens=20, output_tokens=9))
    events = await streamed(replayer, ollama_call(), "ollama-2")
    assert said(events)[2] == {"call_k3f9x2ab": ("add", {"a": 40, "b": 2})}
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "tool-calls"


async def test_llama_cpp_without_sequence_numbers_or_done_events(
    replayer: FakeResponsesServer, pooled_clients: None
) -> None:
    events = await streamed(replayer, llama_reasoning_then_call(), "llama-1")
    assert said(events) == ("", "Add them.", {"call_z9": ("add", {"a": 5, "b": 6})})
    assert reasoning_metadata(events) == [{"itemId": "rs_q1"}]  # "" is no encrypted content
    assert events[-1] == Finish(
        finish_reason="tool-calls",
        usage=Usage(input_tokens=33, output_tokens=7, cached_input_tokens=3),
    )


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (lambda: cut_off(["Half ", "an "]), r"stream ended before the model finished"),
        (lambda: llama_failing(["Half ", "an "]), r"HTTP 500: failed to decode the batch"),
    ],
    ids=["stream-stops", "error-frame"],
)
async def test_a_failure_mid_stream_is_a_recoverable_error_never_a_hang(
    replayer: FakeResponsesServer, pooled_clients: None, shape: Any, expected: str
) -> None:
    with pytest.raises(ModelError, match=expected) as failed:
        await streamed(replayer, shape(), f"fails-{expected[:6]}")
    assert failed.value.retryable


# -- whole turns -------------------------------------------------------------------------------

LOCAL = "gpt/Qwen/Qwen3-8B"
"""The stack's Responses endpoint (`store` off), under a model id that does not reason by
OpenAI's naming: what a vLLM, Ollama or llama.cpp server's model looks like."""


async def test_a_vllm_turn_runs_its_call_once_and_keeps_the_reasoning_as_reasoning(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(
        cid,
        raw_events(*vllm_reasoning_then_call()),
        raw_events(*vllm_text(["It ", "is ", "3."])),
    )
    body = {"settings": {"model": LOCAL}}
    done = await wait_turn(api, "switchable", cid, "1+2?", body=body, wait_timeout=30)
    assert done["status"] == "completed", done
    parts = done["message"]["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "reasoning",
        "tool-add",
        "step-start",
        "text",
    ]
    assert parts[1]["text"] == "The user wants a sum."
    assert (parts[2]["toolCallId"], parts[2]["input"], parts[2]["output"]) == (
        "chatcmpl-tool-c3",
        {"a": 1, "b": 2},
        3,
    )
    assert parts[4]["text"] == "It is 3."
    # The second request hands the call back by its call id, and no reasoning item: with
    # `store` off, one without encrypted content cannot go back (the fake refuses it).
    second = fake_responses.requests(cid)[1]["body"]["input"]
    assert [i.get("type") for i in second[-2:]] == ["function_call", "function_call_output"]
    assert {i.get("call_id") for i in second[-2:]} == {"chatcmpl-tool-c3"}
    assert not [i for i in second if i.get("type") == "reasoning"]
    assert done["usage"]["cached_input_tokens"] == 32 and done["usage"]["reasoning_tokens"] == 24


async def test_a_llama_cpp_error_frame_mid_answer_is_retried_and_the_partial_dropped(
    api: httpx.AsyncClient, fake_responses: FakeResponsesServer, cid: str
) -> None:
    fake_responses.script(
        cid,
        raw_events(*llama_failing(["Half ", "an "])),
        raw_events(*vllm_text(["The ", "whole ", "answer."])),
    )
    body = {"settings": {"model": LOCAL}}
    done = await wait_turn(api, "switchable", cid, "go", body=body, wait_timeout=30)
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "The whole answer."
    assert fake_responses.calls(cid) == 2
    _, events = await read_stream(api, done["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    assert kinds.count("reset-step") == 1 and kinds[-1] == "finish"
