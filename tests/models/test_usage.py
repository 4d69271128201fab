"""Usage and cost: each step's tokens (cached, cache-written and reasoning ones apart) and its
cost from the endpoint's prices or the published ones, unknown when neither knows; the turn's
totals in its view and its `finish` chunk; a conversation's and a tenant's sums (the metrics:
tests/operations/test_metrics.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest
from genai_prices import Usage as PricedUsage
from genai_prices import calc_price

from tests._sse import chunks, read_stream
from think._settings import Prices
from think.models import OpenAIModel, OpenAIStreamState, Usage
from think.models._prices import listed_cost, published_cost
from think.storage import StepUsage, TurnUsage
from think.testing import FakeOpenAIServer, reply, text, tool_call

# -- prices ----------------------------------------------------------------------------------


def test_an_endpoints_prices_are_per_million_tokens_with_cache_tiers() -> None:
    prices = Prices(input=Decimal(2), output=Decimal(8), cached_input=Decimal("0.5"))
    usage = Usage(input_tokens=1_000, cached_input_tokens=400, output_tokens=100)
    # 600 plain input at 2, 400 cached at 0.5, 100 output at 8 (dollars per million).
    assert listed_cost(prices, usage) == Decimal("0.0022")
    # No cache prices: cached and cache-written tokens cost what input does.
    flat = Prices(input=Decimal(1), output=Decimal(1))
    spent = Usage(input_tokens=10, cache_write_tokens=5, output_tokens=10)
    assert listed_cost(flat, spent) == Decimal("0.00002")


def test_published_prices_come_from_genai_prices_and_unknown_is_none() -> None:
    usage = Usage(input_tokens=1_000, cached_input_tokens=200, output_tokens=50)
    expected = calc_price(
        PricedUsage(input_tokens=1_000, cache_read_tokens=200, output_tokens=50),
        "gpt-4o",
        provider_id="openai",
    ).total_price
    assert expected > 0
    assert published_cost(usage, "gpt-4o", base_url="https://api.openai.com/v1") == expected
    assert published_cost(usage, "gpt-4o", provider="openai") == expected
    # A local server's model, or a provider the table does not know: unknown, not free.
    assert published_cost(usage, "qwen2.5:7b", base_url="http://127.0.0.1:11434/v1") is None
    assert published_cost(usage, "no-such-model", provider="openai") is None


def test_the_adapter_prices_its_steps() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=10)
    listed = OpenAIModel(
        "m", base_url="http://127.0.0.1:1/v1", prices=Prices(input=Decimal(1), output=Decimal(2))
    )
    assert listed.cost(usage) == Decimal("0.00102")
    assert OpenAIModel("m", base_url="http://127.0.0.1:1/v1").cost(usage) is None
    proxied = OpenAIModel("gpt-4o", base_url="http://127.0.0.1:1/v1", price_provider="openai")
    assert proxied.cost(usage) == published_cost(usage, "gpt-4o", provider="openai")


# -- what servers report -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        # OpenAI (and Azure, vLLM with prompt caching, OpenRouter): the details objects.
        (
            {
                "prompt_tokens": 900,
                "completion_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 512},
                "completion_tokens_details": {"reasoning_tokens": 64},
            },
            Usage(
                input_tokens=900, output_tokens=120, cached_input_tokens=512, reasoning_tokens=64
            ),
        ),
        # DeepSeek: cache hits counted apart, beside the same details.
        (
            {"prompt_tokens": 300, "completion_tokens": 5, "prompt_cache_hit_tokens": 256},
            Usage(input_tokens=300, output_tokens=5, cached_input_tokens=256),
        ),
        # OpenRouter and LiteLLM report what writing the cache took.
        (
            {
                "prompt_tokens": 50,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 40},
            },
            Usage(input_tokens=50, output_tokens=5, cache_write_tokens=40),
        ),
        # Ollama, llama.cpp: the bare counts; details that are null.
        (
            {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": None},
            Usage(input_tokens=7, output_tokens=3),
        ),
    ],
)
def test_each_servers_usage_is_read(reported: dict[str, Any], expected: Usage) -> None:
    state = OpenAIStreamState()
    state.feed({"choices": [], "usage": reported})
    assert state.usage == expected


# -- the record ------------------------------------------------------------------------------


def test_a_turns_totals_are_its_steps_and_an_unknown_cost_is_unknown() -> None:
    a = StepUsage(model="x/a", input_tokens=10, output_tokens=2, cost=0.1)
    b = StepUsage(model="x/b", input_tokens=5, output_tokens=1, reasoning_tokens=1, cost=0.2)
    both = TurnUsage.of_steps([a, b, a])
    assert (both.input_tokens, both.output_tokens, both.reasoning_tokens) == (25, 5, 1)
    assert both.cost == pytest.approx(0.4) and str(Decimal(str(both.cost))) == "0.4"
    assert both.models == ["x/a", "x/b"]
    assert TurnUsage.of_steps([a, b.model_copy(update={"cost": None})]).cost is None
    # A record written before costs were: its steps' tokens count, its cost is unknown.
    old = {"input_tokens": 3, "output_tokens": 1, "steps": [{"model": "m", "input_tokens": 3}]}
    assert TurnUsage.from_record(old).model_dump(exclude={"steps"}) == {
        "input_tokens": 3,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "cost": None,
        "models": ["m"],
    }
    assert TurnUsage.from_record({}).cost == 0.0  # no step ran: nothing was spent


# -- whole turns -----------------------------------------------------------------------------------

PRICED = "priced/scripted-model"
"""The stack's endpoint with its own prices: 2 and 8 dollars per million, 0.5 cached."""


async def metered_turn(api: httpx.AsyncClient, cid: str, *, model: str = PRICED) -> dict[str, Any]:
    response = await api.post(
        f"/v1/agents/tuned/conversations/{cid}/turns",
        json={
            "input": "go",
            "mode": "wait",
            "wait_timeout": 15,
            "body": {"settings": {"model": model}},
        },
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_a_turn_shows_what_it_spent_in_its_view_and_finish_chunk(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        reply(
            tool_call("add", {"a": 2, "b": 3}),
            usage=Usage(input_tokens=1_000, cached_input_tokens=400, output_tokens=100),
        ),
        reply(text("5."), usage=Usage(input_tokens=1_200, output_tokens=20, reasoning_tokens=8)),
    )
    done = await metered_turn(api, cid)
    assert done["status"] == "completed", done
    usage = done["usage"]
    # Step one: 600 plain at 2, 400 cached at 0.5, 100 out at 8 = 0.0022;
    # step two: 1,200 at 2, 20 out at 8 = 0.00256.
    assert {k: v for k, v in usage.items() if k != "steps"} == {
        "input_tokens": 2_200,
        "output_tokens": 120,
        "cached_input_tokens": 400,
        "cache_write_tokens": 0,
        "reasoning_tokens": 8,
        "cost": 0.00476,
        "models": [PRICED],
    }
    assert [s["cost"] for s in usage["steps"]] == [0.0022, 0.00256]
    assert [s["finish_reason"] for s in usage["steps"]] == ["tool-calls", "stop"]
    # The turn's record says the same, and its stream ends with it.
    assert (await api.get(done["status_url"])).json()["usage"] == usage
    _, events = await read_stream(api, done["stream_url"])
    finish = chunks(events)[-1]
    assert finish["type"] == "finish"
    totals = {k: v for k, v in usage.items() if k != "steps"}
    ended = finish["messageMetadata"]
    assert ended == {
        "usage": totals,
        "model": usage["steps"][-1]["model"],
        "finishedAt": ended["finishedAt"],
    }
    # As the AI SDK merges it into the message it builds, so is it on the message stored.
    stored = (await api.get(f"/v1/agents/tuned/conversations/{cid}/messages")).json()
    answer = next(m for m in stored["messages"] if m["id"] == done["message_id"])
    assert answer["metadata"] == {**chunks(events)[0]["messageMetadata"], **ended}


async def test_an_unpriced_model_costs_unknown_not_zero(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text("Hi."), usage=Usage(input_tokens=10, output_tokens=2)))
    done = await metered_turn(api, cid, model="plain/scripted-model")
    assert done["usage"]["cost"] is None and done["usage"]["input_tokens"] == 10


async def test_a_conversations_usage_and_the_tenants_by_agent_model_and_day(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        reply(text("a"), usage=Usage(input_tokens=100, output_tokens=10)),
        reply(text("b"), usage=Usage(input_tokens=200, output_tokens=20)),
    )
    first = await metered_turn(api, cid)
    second = await metered_turn(api, cid)
    response = await api.get(f"/v1/agents/tuned/conversations/{cid}/usage")
    assert response.status_code == 200, response.text
    summed = response.json()
    assert summed["turns"] == 2
    assert summed["input_tokens"] == 300 and summed["output_tokens"] == 30
    assert summed["cost"] == pytest.approx(first["usage"]["cost"] + second["usage"]["cost"])
    assert summed["models"] == [PRICED]
    # The tenant's, from a window around now.
    day = first["created_at"][:10]
    window = {"since": f"{day}T00:00:00Z", "until": "2999-01-01T00:00:00Z"}
    by_model = (await api.get("/v1/usage", params={**window, "group_by": "model"})).json()
    priced = next(g for g in by_model["groups"] if g["key"] == PRICED)
    assert priced["input_tokens"] >= 300 and priced["turns"] >= 2
    by_day = (await api.get("/v1/usage", params={**window, "group_by": "day"})).json()
    assert by_day["groups"][0]["key"] == day
    by_agent = (await api.get("/v1/usage", params={**window, "group_by": "agent"})).json()
    tuned = next(g for g in by_agent["groups"] if g["key"] == "tuned")
    assert tuned["turns"] >= 2 and PRICED in tuned["models"]
    # A window that ends before these turns holds none of them, as far back as RFC 3339 goes
    # (the default window before an `until` in year 1 starts at its first instant).
    for early in [
        {"since": "2000-01-01T00:00:00Z", "until": "2000-01-02T00:00:00Z"},
        {"since": "0001-01-17T00:01:00.0Z", "until": "0001-01-18T23:00:00+05:00"},
        {"until": "0001-01-02T00:00:00Z"},
    ]:
        got = await api.get("/v1/usage", params={**early, "group_by": "agent"})
        assert got.json() == {"groups": []}, (early, got.text)


async def test_usage_queries_refuse_bad_input_naming_the_field(api: httpx.AsyncClient) -> None:
    for params, field in [
        ({"group_by": "week"}, "group_by"),
        ({"since": "yesterday"}, "since"),
        ({"until": "0.5"}, "until"),
    ]:
        response = await api.get("/v1/usage", params=params)
        assert response.status_code in (400, 422), response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert field in response.text
    # A window with no time in it holds no turns.
    empty = {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    assert (await api.get("/v1/usage", params=empty)).json() == {"groups": []}
    missing = await api.get("/v1/agents/tuned/conversations/no-such-conversation/usage")
    assert missing.status_code == 404
