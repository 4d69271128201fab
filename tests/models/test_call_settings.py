"""Call settings (`ModelSettings`): the agent's defaults, a turn's (`TurnConfig`) and a step's
(`StepConfig`) reach the request each step sends, in Chat Completions' own terms; a setting
that cannot be honoured ends the turn with an error naming it, before any request is sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from think import ModelSettings, StepConfig, TurnConfig
from think.agent import StoredTurnConfig
from think.exceptions import ModelError
from think.models import ModelRequest, OpenAIModel, ToolSpec
from think.models._chat_settings import chat_settings
from think.testing import FakeOpenAIServer, text, tool_call

ADD = ToolSpec(name="add", description="Add two integers.")
LOCAL = "http://127.0.0.1:8000/v1"


# -- the settings themselves -----------------------------------------------------------------


def test_unknown_and_out_of_range_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="temprature"):
        TurnConfig(temprature=0.2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="temperature"):
        ModelSettings(temperature=3)
    with pytest.raises(ValidationError, match="max_output_tokens"):
        StepConfig(max_output_tokens=0)
    with pytest.raises(ValidationError, match="reasoning_effort"):
        ModelSettings(reasoning_effort="extreme")  # type: ignore[arg-type]
    assert ModelSettings(stop="END").stop == ["END"]


def test_each_level_overrides_the_one_below_and_provider_options_merge() -> None:
    agent = ModelSettings(temperature=0.3, max_output_tokens=500, provider_options={"a": 1, "b": 1})
    turn = StoredTurnConfig.read(
        TurnConfig(temperature=0.9, seed=7, provider_options={"b": 2}, max_steps=3).stored()
    )
    step = StepConfig(tool_choice="add", provider_options={"c": 3})
    merged = agent.overridden_by(turn, step)
    assert merged.set_fields() == {
        "temperature": 0.9,
        "max_output_tokens": 500,
        "seed": 7,
        "tool_choice": "add",
        "provider_options": {"a": 1, "b": 2, "c": 3},
    }
    assert type(merged) is ModelSettings  # no turn fields ride along
    assert turn.max_steps == 3


# -- in Chat Completions' terms ------------------------------------------------------------------


def test_the_output_limit_is_named_as_each_server_reads_it() -> None:
    settings = ModelSettings(max_output_tokens=64)
    for base_url, name in [
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://my-resource.openai.azure.com/openai/v1", "max_completion_tokens"),
        (LOCAL, "max_tokens"),
        ("https://openrouter.ai/api/v1", "max_tokens"),
    ]:
        assert chat_settings(settings, [], model="m", base_url=base_url) == {name: 64}


def test_tool_settings_are_sent_only_with_tools() -> None:
    settings = ModelSettings(tool_choice="auto", parallel_tool_calls=False)
    assert chat_settings(settings, [], model="m", base_url=LOCAL) == {}
    assert chat_settings(settings, [ADD], model="m", base_url=LOCAL) == {
        "tool_choice": "auto",
        "parallel_tool_calls": False,
    }
    named = chat_settings(ModelSettings(tool_choice="add"), [ADD], model="m", base_url=LOCAL)
    assert named == {"tool_choice": {"type": "function", "function": {"name": "add"}}}


def test_a_tool_choice_that_cannot_be_honoured_names_what_is_wrong() -> None:
    with pytest.raises(ModelError, match=r"'nope'.*it offers: add") as caught:
        chat_settings(ModelSettings(tool_choice="nope"), [ADD], model="m", base_url=LOCAL)
    assert caught.value.retryable is False
    with pytest.raises(ModelError, match=r"'required'.*no tools"):
        chat_settings(ModelSettings(tool_choice="required"), [], model="m", base_url=LOCAL)


def test_provider_options_come_last_and_win() -> None:
    settings = ModelSettings(temperature=0.5, seed=1, provider_options={"seed": 2, "top_k": 40})
    fields = chat_settings(settings, [], model="m", base_url=LOCAL)
    assert fields == {"temperature": 0.5, "seed": 2, "top_k": 40}


async def test_the_adapter_sends_them(server: FakeOpenAIServer, pooled_clients: None) -> None:
    model = OpenAIModel("m", base_url=server.base_url, api_key="k")
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_output_tokens=100,
        tool_choice="required",
        parallel_tool_calls=True,
        reasoning_effort="low",
        stop="STOP",
        seed=11,
        provider_options={"top_k": 5},
    )
    server.script("cs-1", text("ok"))
    request = ModelRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        tools=[ADD],
        settings=settings,
        metadata={"conversation-id": "cs-1"},
    )
    assert [e.type async for e in model.stream(request)] == ["text", "finish"]
    body = server.requests("cs-1")[0]["body"]
    sent = {k: body[k] for k in body if k not in ("model", "messages", "stream", "tools")}
    assert sent == {
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 100,
        "tool_choice": "required",
        "parallel_tool_calls": True,
        "reasoning_effort": "low",
        "stop": ["STOP"],
        "seed": 11,
        "top_k": 5,
    }
    # A request with no settings sends none of them.
    server.script("cs-2", text("ok"))
    plain = ModelRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        metadata={"conversation-id": "cs-2"},
    )
    assert [e.type async for e in model.stream(plain)] == ["text", "finish"]
    assert set(server.requests("cs-2")[0]["body"]) == {
        "model",
        "messages",
        "stream",
        "stream_options",
    }


# -- whole turns -----------------------------------------------------------------------------------


def path(cid: str) -> str:
    return f"/v1/agents/tuned/conversations/{cid}"


async def turn(api: httpx.AsyncClient, cid: str, body: dict[str, Any] | None = None) -> Any:
    submission: dict[str, Any] = {"input": "go", "mode": "wait", "wait_timeout": 15}
    if body is not None:
        submission["body"] = body
    response = await api.post(f"{path(cid)}/turns", json=submission)
    assert response.status_code == 200, response.text
    return response.json()


def fields(request: Any, *names: str) -> dict[str, Any]:
    body = request["body"]
    return {name: body.get(name) for name in names}


NAMES = ("temperature", "max_tokens", "top_k", "min_p", "seed", "stop", "tool_choice")


async def test_the_agents_defaults_reach_every_request(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello."))
    assert (await turn(api, cid))["status"] == "completed"
    [sent] = fake_model.requests(cid)
    assert fields(sent, *NAMES) == {
        "temperature": 0.3,
        "max_tokens": 500,
        "top_k": 20,
        "min_p": 0.1,
        "seed": None,
        "stop": None,
        "tool_choice": None,
    }


async def test_a_turns_and_a_steps_settings_lay_over_the_agents(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("add", {"a": 2, "b": 3}), text("5."))
    settings = {"temperature": 0.9, "stop": "END", "seed": 7}
    done = await turn(api, cid, {"settings": settings})
    assert done["status"] == "completed", done
    first, second = fake_model.requests(cid)
    # The first step: before_step forced the tool and changed one provider option.
    assert fields(first, *NAMES) == {
        "temperature": 0.9,
        "max_tokens": 500,
        "top_k": 20,
        "min_p": 0.2,
        "seed": 7,
        "stop": ["END"],
        "tool_choice": {"type": "function", "function": {"name": "add"}},
    }
    # The second step (after the tool ran, maybe on another worker): the turn's settings
    # again, read back from the stored turn, without the first step's.
    assert fields(second, *NAMES) == {**fields(first, *NAMES), "min_p": 0.1, "tool_choice": None}
    # The next turn, without a TurnConfig, is back to the agent's.
    fake_model.script(cid, text("Hi."))
    await turn(api, cid)
    assert fields(fake_model.requests(cid)[-1], "temperature", "seed") == {
        "temperature": 0.3,
        "seed": None,
    }


async def test_a_setting_that_cannot_be_honoured_ends_the_turn_naming_it(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    done = await turn(api, cid, {"settings": {"tool_choice": "lookup"}})
    assert done["status"] == "error"
    assert "tool_choice 'lookup'" in done["error"] and "add" in done["error"]
    # A misspelt one: before_turn's TurnConfig refuses it, and the turn ends cleanly.
    done = await turn(api, cid, {"settings": {"temprature": 0.1}})
    assert done["status"] == "error"
    assert fake_model.calls(cid) == 0  # neither turn sent a request
    fake_model.script(cid, text("Fine."))
    assert (await turn(api, cid))["status"] == "completed"
