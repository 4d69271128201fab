"""Agents for the sub-agent extras (tests/turns/test_sub_agent_extras.py): a parent whose
agent tools are capped per step, one whose child answers with a typed output, and one that
needs a person's approval before it starts its child."""

from __future__ import annotations

from pydantic import BaseModel

from tests.agents import Helper, Researcher
from think import Tool, TurnConfig, TurnContext, agent_tool


class Finding(BaseModel):
    """The typed answer of `Analyst`'s turns."""

    topic: str
    confidence: float


class Analyst(Helper):
    """A sub-agent that answers with a `Finding` (`TurnConfig.output`), hosted because
    `Dispatcher` delegates to it."""

    name = "analyst"

    def get_tools(self) -> list[Tool]:
        return []

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        return TurnConfig(output=Finding)


class Dispatcher(Helper):
    """Runs at most two agent-tool calls of a step (`max_concurrent_agent_tools`): `research`
    (a fresh `Researcher` per call), `analyse` (typed output) and `research_checked` (asks a
    person first)."""

    name = "dispatcher"
    max_concurrent_agent_tools = 2

    def get_tools(self) -> list[Tool]:
        return [
            agent_tool(Researcher, name="research", fresh=True, timeout=30),
            agent_tool(Analyst, name="analyse", fresh=True, timeout=30),
            agent_tool(Researcher, name="research_checked", needs_approval=True, timeout=30),
        ]
