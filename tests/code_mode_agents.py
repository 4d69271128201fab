"""Agents in code mode (tests/code_execution/test_code_mode.py). Each tool reports every run
to a counting HTTP server the test owns (`tests.code_execution._effects`), at the address the
conversation's configuration names, so the test counts how often each ran, across workers."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from think import Think, Tool, ToolContext, tool


async def _effect(ctx: ToolContext, name: str) -> bool:
    """Count a run; whether it is the tool's first."""
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"{ctx.config['effects_url']}/{name}", json={})
    response.raise_for_status()
    return bool(response.json()["first"])


@tool
async def lookup(city: str, ctx: ToolContext) -> dict[str, Any]:
    """The temperature in a city.

    Args:
        city: The city.
    """
    await _effect(ctx, "lookup")
    return {"city": city, "celsius": 20}


@tool
async def convert(celsius: float, ctx: ToolContext) -> dict[str, Any]:
    """Celsius to Fahrenheit.

    Args:
        celsius: Degrees Celsius.
    """
    await _effect(ctx, "convert")
    return {"fahrenheit": celsius * 9 / 5 + 32}


@tool(needs_approval=True)
async def send_report(text: str, ctx: ToolContext) -> dict[str, Any]:
    """Send a report to the team; a person approves each.

    Args:
        text: The report.
    """
    await _effect(ctx, "send_report")
    return {"sent": text}


@tool
async def fail(ctx: ToolContext) -> str:
    """Always fails."""
    await _effect(ctx, "fail")
    raise RuntimeError("the fail tool failed, as it always does")


@tool
async def stall(ctx: ToolContext) -> str:
    """Stalls on its first run ever (the test kills the worker then), returns at once after."""
    if await _effect(ctx, "stall"):
        await asyncio.sleep(3600)
    return "went on"


class Coder(Think):
    """Code mode on, over four tools."""

    name = "coder"
    max_steps = 4
    code_mode = True

    def get_model(self) -> str:
        return "scripted-model"

    def get_system_prompt(self) -> str:
        return "You are a test agent."

    def get_tools(self) -> list[Tool]:
        return [lookup, convert, send_report, fail, stall]


class NoCode(Coder):
    """The same tools, code mode left off (the default)."""

    name = "nocode"
    code_mode = False
