"""Budgets in money and per day: a turn's `turn_budget_cost` (checked between steps, as the token
and time budgets are; refused before any request when the model has no price), and a tenant's
daily budgets in tokens and money (`THINK_TENANT_DAILY_TOKENS`, `THINK_TENANT_DAILY_COST`: past
either, a submission is 429 `/problems/budget-exhausted` with `Retry-After`)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests._stack import Stack, bearer_client, extra_gateway
from tests._turn_helpers import wait_turn
from think import Think, TurnConfig
from think._settings import Settings
from think.exceptions import UserError
from think.models import Usage
from think.schedules._inputs import OccurrenceInput, OccurrenceRequest
from think.schedules._occurrence import ScheduleActivities
from think.storage import DailyBudgets
from think.testing import FakeOpenAIServer, reply, text, tool_call
from think.turns import ThinkService

PRICED = "priced/scripted-model"
"""The stack's endpoint with its own prices: 2 and 8 dollars per million, 0.5 cached."""
UNPRICED = "plain/scripted-model"


def turns_url(cid: str) -> str:
    return f"/v1/agents/tuned/conversations/{cid}/turns"


async def turn_with(api: httpx.AsyncClient, cid: str, settings: dict[str, Any]) -> dict[str, Any]:
    return await wait_turn(api, "tuned", cid, "go", body={"settings": settings}, wait_timeout=15)


# -- a turn's budget in money ----------------------------------------------------------------


async def test_a_spent_cost_budget_stops_the_next_step(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    # Step one costs 1,000 input tokens at $2 a million: $0.002, over the turn's $0.001.
    fake_model.script(
        cid,
        reply(tool_call("add", {"a": 1, "b": 2}), usage=Usage(input_tokens=1_000)),
        text("never asked"),
    )
    turn = await turn_with(api, cid, {"model": PRICED, "turn_budget_cost": 0.001})
    assert turn["status"] == "interrupted", turn
    assert turn["error"] == "cost budget spent: $0.002 of $0.001 used"
    assert turn["message"]["parts"][1]["output"] == 3  # what ran is kept
    assert turn["usage"]["cost"] == 0.002
    assert fake_model.calls(cid) == 1


async def test_a_cost_budget_within_reach_lets_the_turn_finish(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        reply(tool_call("add", {"a": 1, "b": 2}), usage=Usage(input_tokens=1_000)),
        reply(text("3"), usage=Usage(input_tokens=1_000)),
    )
    turn = await turn_with(api, cid, {"model": PRICED, "turn_budget_cost": 1.0})
    assert turn["status"] == "completed", turn
    assert fake_model.calls(cid) == 2


async def test_a_cost_budget_on_a_model_without_a_price_is_refused_before_any_request(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A budget in money that cannot be kept is an error naming what to set, not a turn that
    runs unbounded."""
    fake_model.script(cid, text("never asked"))
    turn = await turn_with(api, cid, {"model": UNPRICED, "turn_budget_cost": 0.5})
    assert turn["status"] == "error", turn
    assert "turn_budget_cost" in turn["error"] and UNPRICED in turn["error"]
    assert "prices" in turn["error"]
    assert fake_model.calls(cid) == 0


def test_a_cost_budget_must_be_a_positive_amount() -> None:
    with pytest.raises(ValidationError, match="turn_budget_cost"):
        TurnConfig(turn_budget_cost=-1)
    assert TurnConfig(turn_budget_cost=0.25).stored() == {"turn_budget_cost": 0.25}
    with pytest.raises(UserError, match=r"Spendthrift.turn_budget_cost=0 must be a positive"):

        class Spendthrift(Think):
            turn_budget_cost = 0


# -- a tenant's daily budgets ----------------------------------------------------------------

TOKENS_TENANT = f"tokens-{secrets.token_hex(3)}"
COST_TENANT = f"cost-{secrets.token_hex(3)}"
SPARE_TENANT = f"spare-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def budgeted_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    keys = ",".join(f"{t}-key:{t}" for t in (TOKENS_TENANT, COST_TENANT, SPARE_TENANT))
    env = {
        **stack.env,
        "THINK_API_KEYS": keys,
        "THINK_TENANT_DAILY_TOKENS": "1000",
        "THINK_TENANT_DAILY_COST": "0.001",
    }
    with extra_gateway(env, tmp_path_factory.mktemp("budgets")) as url:
        yield url


async def spent_until_refused(
    api: httpx.AsyncClient, cid: str, settings: dict[str, Any]
) -> httpx.Response:
    """Submit once more after the budget was spent (past the gateway's freshness, so it reads
    the spend again), and answer the refusal."""
    await asyncio.sleep(DailyBudgets.fresh_for + 0.2)
    return await api.post(turns_url(cid), json={"input": "again", "body": {"settings": settings}})


def assert_budget_refusal(refused: httpx.Response, budget: str) -> None:
    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["type"].endswith("/budget-exhausted")
    assert problem["budget"] == budget
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    to_midnight = (midnight + timedelta(days=1) - datetime.now(UTC)).total_seconds()
    assert abs(int(refused.headers["retry-after"]) - to_midnight) <= 5
    assert "midnight UTC" in problem["detail"]


async def test_past_the_daily_token_budget_submissions_are_429(
    budgeted_api: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid, reply(text("long answer"), usage=Usage(input_tokens=900, output_tokens=200))
    )
    settings = {"model": UNPRICED}
    async with (
        bearer_client(budgeted_api, f"{TOKENS_TENANT}-key") as tenant,
        bearer_client(budgeted_api, f"{SPARE_TENANT}-key") as spare,
    ):
        first = await turn_with(tenant, cid, settings)
        assert first["status"] == "completed", first
        refused = await spent_until_refused(tenant, cid, settings)
        assert_budget_refusal(refused, "daily_tokens")
        assert refused.json()["used"] == 1_100 and refused.json()["limit"] == 1_000
        # Nothing was admitted for it.
        listed = (await tenant.get(turns_url(cid))).json()["turns"]
        assert len(listed) == 1
        # Another tenant's day is its own.
        fake_model.script(f"{cid}-spare", text("hi"))
        theirs = await turn_with(spare, f"{cid}-spare", settings)
        assert theirs["status"] == "completed", theirs
        # The operator sees the refusal counted.
        scraped = (await spare.get("/metrics")).text
        assert 'think_rate_limited_total{limit="daily_tokens"}' in scraped


async def test_past_the_daily_cost_budget_submissions_are_429(
    budgeted_api: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    settings = {"model": PRICED}
    async with bearer_client(budgeted_api, f"{COST_TENANT}-key") as tenant:
        # 100 input tokens at $2 a million and 50 output at $8: $0.0006, under the day's $0.001.
        fake_model.script(cid, reply(text("a"), usage=Usage(input_tokens=100, output_tokens=50)))
        first = await turn_with(tenant, cid, settings)
        assert first["status"] == "completed", first
        await asyncio.sleep(DailyBudgets.fresh_for + 0.2)
        # As much again: $0.0012 today, over it (at 300 tokens, far under the token budget).
        fake_model.script(cid, reply(text("b"), usage=Usage(input_tokens=100, output_tokens=50)))
        second = await turn_with(tenant, cid, settings)
        assert second["status"] == "completed", second
        refused = await spent_until_refused(tenant, cid, settings)
        assert_budget_refusal(refused, "daily_cost")
        assert refused.json()["used"] == pytest.approx(0.0012)
        assert refused.json()["limit"] == 0.001


async def test_the_problem_type_is_described(budgeted_api: str) -> None:
    async with httpx.AsyncClient(base_url=budgeted_api) as client:
        described = await client.get("/problems/budget-exhausted")
    assert described.status_code == 200
    assert "THINK_TENANT_DAILY_COST" in described.text


async def test_past_the_daily_budget_a_scheduled_prompt_is_skipped(
    api: httpx.AsyncClient, settings: Settings, cid: str
) -> None:
    """A scheduled prompt is new work, as a submission is: past its tenant's daily budget the
    occurrence admits no turn."""
    done = await wait_turn(api, "helper", cid, "spend a little")  # the default tenant's
    assert done["status"] == "completed" and done["usage"]["input_tokens"] > 0, done
    tight = settings.model_copy(
        update={"agents": ["tests.schedule_agents:Digest"], "tenant_daily_tokens": 1}
    )
    async with await ThinkService.connect(tight) as service:
        occurrence = OccurrenceInput(schedule_id=f"s-{cid}", agent="sched_digest", task="weekly")
        request = OccurrenceRequest(occurrence=occurrence, scheduled_for=datetime.now(UTC))
        result = await ScheduleActivities(service)._run_occurrence(request)
    assert result.outcome == "skipped" and result.turn_id is None
