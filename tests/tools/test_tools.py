"""Tools as typed Python: schemas from signatures, validation, and the context parameter."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from think import Tool, ToolContext, ToolError, tool


class Place(BaseModel):
    city: str
    country: str = "FR"


@tool
async def plan(
    place: Place,
    days: Annotated[int, Field(ge=1, le=14, description="How many days")] = 3,
    pace: Literal["slow", "fast"] = "slow",
    ctx: ToolContext | None = None,
) -> str:
    """Plan a trip."""
    assert ctx is not None
    return f"{place.city} {days} {pace} {ctx.turn_id}"


@tool
async def keyed(x: int, ctx: ToolContext) -> str:
    """Echo the idempotency key."""
    return f"{x} {ctx.idempotency_key}"


def test_schema_comes_from_the_signature() -> None:
    spec = plan.spec
    assert spec.description == "Plan a trip."
    props = spec.parameters["properties"]
    assert set(props) == {"place", "days", "pace"}  # never the context
    assert props["days"]["minimum"] == 1 and props["days"]["description"] == "How many days"
    assert props["pace"]["enum"] == ["slow", "fast"]
    assert spec.parameters["required"] == ["place"]


def test_context_parameter_is_hidden_from_the_model() -> None:
    assert "ctx" not in keyed.spec.parameters["properties"]
    assert keyed.context_param == "ctx"


def test_validation_names_the_problem() -> None:
    with pytest.raises(ToolError, match=r"days: Input should be less than or equal to 14"):
        plan.validate({"place": {"city": "Paris"}, "days": 40})
    with pytest.raises(ToolError, match=r"place: Field required"):
        plan.validate({})
    with pytest.raises(ToolError, match=r"nope: Extra inputs are not permitted"):
        plan.validate({"place": {"city": "Paris"}, "nope": 1})


async def test_context_is_injected_and_its_key_is_stable() -> None:
    ctx = ToolContext(
        agent="a", conversation_id="c", turn_id="turn_1", tool_call_id="call_9", tool_name="keyed"
    )
    assert await keyed(ctx, **keyed.validate({"x": 2})) == "2 turn_1:call_9"
    again = ctx.model_copy(update={"attempt": 3})
    assert again.idempotency_key == ctx.idempotency_key


def test_sync_tools_and_names() -> None:
    named = tool(name="adder", description="Adds.")(lambda a, b: a + b)
    assert isinstance(named, Tool) and named.name == "adder" and named.description == "Adds."
