"""What `before_tool_call` and `after_tool_call` receive and return.

Both hooks run inside the tool's activity, on the worker, around every server-side call: a
retried activity runs them again, so they should be as idempotent as the tool itself.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from think.tools import ToolCallIdentity


class ToolCallContext(ToolCallIdentity):
    """A server tool call about to run, with its validated input."""

    input: dict[str, Any] = Field(default_factory=dict)
    attempt: int = 1
    """Temporal's attempt of the tool activity: above 1 after a crash or an outage."""


class ToolCallDecision(BaseModel):
    """What `before_tool_call` decides: run the tool (optionally with changed input), block it
    (the model reads `reason` as the tool's result), or substitute an output without running it.
    """

    model_config = ConfigDict(frozen=True)

    action: Literal["allow", "block", "substitute"] = "allow"
    input: dict[str, Any] | None = None
    """For `allow`: the input to run with instead of the model's (validated again)."""
    reason: str = "the call was blocked"
    """For `block`: what the model is told."""
    output: Any = None
    """For `substitute`: the result the model receives."""

    @classmethod
    def allow(cls, input: dict[str, Any] | None = None) -> ToolCallDecision:
        return cls(action="allow", input=input)

    @classmethod
    def block(cls, reason: str) -> ToolCallDecision:
        return cls(action="block", reason=reason)

    @classmethod
    def substitute(cls, output: Any) -> ToolCallDecision:
        return cls(action="substitute", output=output)


class ToolCallResultContext(ToolCallContext):
    """The outcome of a server tool call. Blocked and substituted calls count as `success`:
    the model receives a valid result. Only an error of the tool itself is `success=False`."""

    outcome: Literal["executed", "blocked", "substituted", "failed"]
    success: bool
    output: Any = None
    error: str | None = None
    duration_ms: float = 0.0
