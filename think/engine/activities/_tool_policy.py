"""A server tool's run as its policy says: each attempt bounded by its timeout, its failures
retried with backoff, its preliminary outputs streamed; heartbeating meanwhile. Shared by the
tool-call activity and the action runner."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from think.engine.activities._heartbeat import heartbeating
from think.exceptions import ToolError
from think.tools import Tool, ToolContext, tool_output_json

log = logging.getLogger("think.engine.activities")


class ToolTimedOut(ToolError):
    """An attempt of a tool did not finish within its `timeout`."""


async def run_with_policy(
    tool: Tool,
    context: ToolContext,
    arguments: dict[str, Any],
    progress: Callable[[Any], Awaitable[None]] | None = None,
) -> Any:
    """Run the tool with its timeout, retrying its failures (a `ToolError` only when it is
    `retryable`) with backoff. A streaming tool's yields go to `progress` as they come, and
    its last is the result; a retry runs it again from its start."""
    policy = tool.policy
    delay = policy.retry_initial_seconds
    async with heartbeating():
        for attempt in range(1, policy.max_attempts + 1):
            try:
                async with asyncio.timeout(policy.timeout_seconds):
                    if progress is None:
                        return tool_output_json(await tool(context, **arguments))
                    result = None
                    async for value in tool.stream(context, **arguments):
                        result = tool_output_json(value)
                        await progress(result)
                    return result
            except ToolError as exc:
                if not exc.retryable or attempt >= policy.max_attempts:
                    raise
                await _pause(tool, attempt, exc, delay)
                delay = min(delay * policy.retry_backoff, policy.retry_max_seconds)
            except Exception as exc:
                if isinstance(exc, TimeoutError):
                    exc = ToolTimedOut(
                        f"tool {tool.name!r} did not finish within {policy.timeout_seconds:g} s"
                    )
                if attempt >= policy.max_attempts:
                    raise exc from None
                await _pause(tool, attempt, exc, delay)
                delay = min(delay * policy.retry_backoff, policy.retry_max_seconds)
    raise AssertionError("unreachable")


async def _pause(tool: Tool, attempt: int, exc: Exception, delay: float) -> None:
    log.warning(
        "tool %s attempt %d of %d failed (%s); retrying in %.1f s",
        tool.name,
        attempt,
        tool.policy.max_attempts,
        exc,
        delay,
    )
    await asyncio.sleep(delay)
