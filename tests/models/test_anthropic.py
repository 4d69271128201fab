"""Anthropic's Messages API behind the one `ModelClient` interface: the transcript in its shape
(system apart, roles alternating, tool results as `tool_result` blocks, the stable prefix marked
for the prompt cache), call settings in its terms, its event stream read into the turn's, usage
with cache reads and writes, and its errors told apart; whole turns through the stack against
`FakeAnthropicServer`, a real HTTP server speaking the API, driven by the official SDK."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests._sse import chunks, read_stream
from tests._turn_helpers import wait_turn
from think.exceptions import ModelError
from think.models import ModelSettings, ToolSpec, Usage
from think.models._anthropic import anthropic_settings, mark_cache, to_anthropic_messages
from think.testing import FakeAnthropicServer, error, reasoning, reply, text, tool_call
from think.testing._fake_anthropic import refusal, signature_of

ADD = ToolSpec(name="add", parameters={"type": "object", "properties": {}})

# -- the request -------------------------------------------------------------------------------


def test_a_tool_loop_transcript_becomes_alternating_messages_with_cached_prefix() -> None:
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+2? and 3+4?"},
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                },
                {
                    "id": "t2",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":3,"b":4}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "3"},
        {"role": "tool", "tool_call_id": "t2", "content": "7"},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}],
        },
    ]
    system, messages = to_anthropic_messages(chat)
    assert system == [{"type": "text", "text": "Be brief."}]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1, "b": 2}},
        {"type": "tool_use", "id": "t2", "name": "add", "input": {"a": 3, "b": 4}},
    ]
    # Both results, then the image a tool read, in one user message.
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "3"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "7"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
    ]
    mark_cache(system, messages)
    assert system[-1]["cache_control"] == {"type": "ephemeral"}
    assert messages[1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in messages[2]["content"][-1]
    assert refusal({"max_tokens": 10, "messages": messages}) is None  # as the API would take it


def test_call_settings_in_the_messages_apis_terms() -> None:
    settings = ModelSettings(
        temperature=0.3,
        max_output_tokens=500,
        stop="END",
        tool_choice="required",
        parallel_tool_calls=False,
        provider_options={"top_k": 5},
    )
    assert anthropic_settings(settings, [ADD], "m") == {
        "max_tokens": 500,
        "temperature": 0.3,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "top_k": 5,
    }
    named = anthropic_settings(ModelSettings(tool_choice="add"), [ADD], "m")
    assert named["tool_choice"] == {"type": "tool", "name": "add"}
    # Unset, `max_tokens` is what the model's family writes by default, never past its most.
    assert named["max_tokens"] == 16_384
    assert anthropic_settings(ModelSettings(), [], "claude-3-haiku-20240307")["max_tokens"] == 4096
    with pytest.raises(ModelError, match="has no extended thinking"):
        anthropic_settings(ModelSettings(reasoning_effort="low"), [], "claude-3-5-haiku-latest")
    with pytest.raises(ModelError, match="above Anthropic's most"):
        anthropic_settings(ModelSettings(temperature=1.5), [], "m")
    thinking = anthropic_settings(
        ModelSettings(reasoning_effort="medium", max_output_tokens=1000), [], "m"
    )
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert thinking["max_tokens"] > 8192  # room to answer past the budget
    with pytest.raises(ModelError, match="no seed") as refused:
        anthropic_settings(ModelSettings(seed=7), [], "m")
    assert not refused.value.retryable and refused.value.kind == "refused"
    with pytest.raises(ModelError, match="names no tool"):
        anthropic_settings(ModelSettings(tool_choice="nope"), [ADD], "m")
    # Anthropic refuses these beside extended thinking: said before any request.
    hot = ModelSettings(reasoning_effort="low", temperature=0.3)
    with pytest.raises(ModelError, match=r"temperature is set .* with reasoning_effort"):
        anthropic_settings(hot, [ADD], "m")
    forced = ModelSettings(reasoning_effort="low", tool_choice="required")
    with pytest.raises(ModelError, match=r"tool_choice is set .* with reasoning_effort"):
        anthropic_settings(forced, [ADD], "m")


def test_the_fake_refuses_what_the_api_refuses() -> None:
    user = {"role": "user", "content": "hi"}
    assert refusal({"messages": [user]}) == "max_tokens: Field required"
    assert "alternate" in str(refusal({"max_tokens": 5, "messages": [user, user]}))
    stray = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"}],
    }
    assert "corresponding `tool_use`" in str(refusal({"max_tokens": 5, "messages": [stray]}))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    assert "greater than `thinking.budget_tokens`" in str(
        refusal({"max_tokens": 2048, "thinking": thinking, "messages": [user]})
    )
    call = {"type": "tool_use", "id": "t1", "name": "add", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "3"}
    loop = [user, {"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    assert "must start with a thinking block" in str(
        refusal({"max_tokens": 4096, "thinking": thinking, "messages": loop})
    )
    forged = {"type": "thinking", "thinking": "I add.", "signature": "forged"}
    loop[1] = {"role": "assistant", "content": [forged, call]}
    assert "Invalid `signature`" in str(
        refusal({"max_tokens": 4096, "thinking": thinking, "messages": loop})
    )
    loop[1]["content"][0] = {**forged, "signature": signature_of("I add.")}
    assert refusal({"max_tokens": 4096, "thinking": thinking, "messages": loop}) is None
    unanswered = [user, {"role": "assistant", "content": [call]}, user]
    assert "without `tool_result`" in str(refusal({"max_tokens": 5, "messages": unanswered}))
    empty = {"role": "user", "content": [{"type": "text", "text": ""}]}
    assert "non-empty" in str(refusal({"max_tokens": 5, "messages": [empty]}))


# -- whole turns -------------------------------------------------------------------------------

CLAUDE = "claude/claude-sonnet-4-5"


async def claude_turn(
    api: httpx.AsyncClient,
    cid: str,
    settings: dict[str, Any] | None = None,
    agent: str = "tuned",
) -> dict[str, Any]:
    body = {"settings": {"model": CLAUDE, **(settings or {})}}
    return await wait_turn(api, agent, cid, "go", body=body, wait_timeout=30)


async def test_a_plain_answer(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    fake_anthropic.script(cid, text("Hello ", "from Claude."))
    done = await claude_turn(api, cid)
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "Hello from Claude."
    sent = fake_anthropic.requests(cid)[0]
    # The SDK sends the key as `x-api-key` (or, in its newest releases, as a bearer token).
    headers = sent["headers"]
    key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    assert key == "sk-ant-test" and "anthropic-version" in headers
    assert sent["body"]["model"] == "claude-sonnet-4-5"
    # The agent's settings (tuned: temperature 0.3, 500 tokens, provider options) in its terms.
    assert sent["body"]["temperature"] == 0.3 and sent["body"]["max_tokens"] == 500
    assert sent["body"]["top_k"] == 20
    assert sent["body"]["system"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_tools_in_parallel_then_the_answer_with_usage_and_cost(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    fake_anthropic.script(
        cid,
        reply(
            tool_call("add", {"a": 1, "b": 2}, id="toolu_1")
            + tool_call("add", {"a": 3, "b": 4}, id="toolu_2"),
            usage=Usage(input_tokens=1_000, cache_write_tokens=800, output_tokens=40),
        ),
        reply(
            text("3 and 7."),
            usage=Usage(input_tokens=1_100, cached_input_tokens=800, output_tokens=10),
        ),
    )
    done = await claude_turn(api, cid)
    assert done["status"] == "completed", done
    tools = [p for p in done["message"]["parts"] if p["type"] == "tool-add"]
    assert [(t["toolCallId"], t["output"]) for t in tools] == [("toolu_1", 3), ("toolu_2", 7)]
    assert done["message"]["parts"][-1]["text"] == "3 and 7."
    # The second request carried both results in one user message after the tool_use turn,
    # and the cache breakpoint moved to the assistant's turn.
    second = fake_anthropic.requests(cid)[1]["body"]["messages"]
    assert [b["type"] for b in second[-1]["content"]] == ["tool_result", "tool_result"]
    assert second[-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    usage = done["usage"]
    assert usage["input_tokens"] == 2_100 and usage["output_tokens"] == 50
    assert usage["cached_input_tokens"] == 800 and usage["cache_write_tokens"] == 800
    assert usage["models"] == [CLAUDE]
    assert usage["cost"] is not None and usage["cost"] > 0  # Anthropic's published prices


async def test_thinking_is_kept_as_reasoning(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    fake_anthropic.script(cid, reasoning("Let me ", "think.") + text("Done."))
    # Not `tuned`, whose temperature Anthropic refuses beside extended thinking.
    done = await claude_turn(api, cid, {"reasoning_effort": "low"}, agent="switchable")
    assert done["status"] == "completed", done
    kinds = [
        (p["type"], p.get("text")) for p in done["message"]["parts"] if p["type"] != "step-start"
    ]
    assert kinds == [("reasoning", "Let me think."), ("text", "Done.")]
    assert fake_anthropic.requests(cid)[0]["body"]["thinking"]["budget_tokens"] == 2048


async def test_signed_thinking_is_handed_back_before_the_tool_use(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    """With thinking on, Anthropic checks that a tool loop's assistant turn begins with the
    signed thinking block it sent: the signature is stored on the reasoning part and sent back."""
    fake_anthropic.script(
        cid, reasoning("I should add.") + tool_call("add", {"a": 1, "b": 2}), text("3.")
    )
    # Not `tuned`, whose temperature Anthropic refuses beside extended thinking.
    done = await claude_turn(api, cid, {"reasoning_effort": "low"}, agent="switchable")
    assert done["status"] == "completed", done
    thought = next(p for p in done["message"]["parts"] if p["type"] == "reasoning")
    signature = signature_of("I should add.")  # what the fake signs with, and checks
    assert thought["providerMetadata"] == {"anthropic": {"signature": signature}}
    second = fake_anthropic.requests(cid)[1]["body"]["messages"]
    assert second[-2]["role"] == "assistant"
    assert second[-2]["content"][0] == {
        "type": "thinking",
        "thinking": "I should add.",
        "signature": signature,
    }
    assert second[-2]["content"][1]["type"] == "tool_use"


async def test_structured_output_through_the_answer_tool(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    fake_anthropic.script(cid, tool_call("final_answer", {"city": "Paris"}))
    done = await claude_turn(api, cid, {"output": schema})
    assert done["status"] == "completed", done
    assert done["output"] == {"city": "Paris"}
    offered = [t["name"] for t in fake_anthropic.requests(cid)[0]["body"]["tools"]]
    assert "final_answer" in offered


async def test_a_refused_key_names_the_variable_never_the_key(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    fake_anthropic.script(cid, error(401, "invalid x-api-key"))
    done = await claude_turn(api, cid)
    assert done["status"] == "error", done
    assert "refused the API key for model claude-sonnet-4-5" in done["error"]
    assert "THINK_TEST_ANTHROPIC_KEY" in done["error"] and "sk-ant-test" not in done["error"]


async def test_an_overload_mid_stream_is_retried_from_scratch(
    api: httpx.AsyncClient, fake_anthropic: FakeAnthropicServer, cid: str
) -> None:
    fake_anthropic.script(cid, text("half") + error(529, "Overloaded"), text("whole answer"))
    done = await claude_turn(api, cid)
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "whole answer"
    assert fake_anthropic.calls(cid) == 2
    _, events = await read_stream(api, done["stream_url"])
    assert "reset-step" in [c["type"] for c in chunks(events)]
