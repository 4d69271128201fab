"""Channels: per-channel policy for an agent's turns. A turn's channel is who it came from
(`TurnRequest.channel`: "web" for /v1 and the Python API, a messenger's name for its turns);
`Think.configure_channels()` declares what differs there: instructions added to the system
prompt, which tools the model is offered, and the step limit.

    class Support(Think):
        def configure_channels(self) -> list[Channel]:
            return [Channel("slack", instructions="Answer in two sentences.",
                            tools=["lookup_order"], max_steps=3)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import UserError

if TYPE_CHECKING:
    from think.agent._think import Think

WEB_CHANNEL = "web"
"""The implicit channel of every turn submitted through /v1 (and the Python API)."""


class ChannelError(UserError):
    """A channel declaration that cannot work; the worker does not start."""


class Channel(BaseModel):
    """What differs for an agent's turns on channel `name`; None keeps the agent's own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    instructions: str | None = None
    """Appended to the system prompt (after a blank line) for this channel's turns."""
    tools: tuple[str, ...] | None = None
    """The names of the tools offered on this channel (the agent's Python tools and actions);
    None: all of them. A call to another is refused as a tool error."""
    max_steps: int | None = Field(default=None, ge=1)
    """The most model steps one of this channel's turns may take (the lower of this and the
    agent's `max_steps`, or a `before_turn` override)."""

    def __init__(
        self,
        name: str,
        instructions: str | None = None,
        tools: Sequence[str] | None = None,
        max_steps: int | None = None,
    ) -> None:
        super().__init__(
            name=name,
            instructions=instructions,
            tools=tuple(tools) if tools is not None else None,
            max_steps=max_steps,
        )


def declared_channels(agent: Think, *, check_tools: bool = True) -> dict[str, Channel]:
    """The agent's channels by name, checked: each a `Channel`, no name twice, "web" at most
    once (declaring it sets the policy of /v1's turns), and every tool named one the agent
    has. Raises `ChannelError` naming the agent and what is wrong."""
    owner = type(agent).__name__
    declared = agent.configure_channels()
    if not isinstance(declared, Sequence) or isinstance(declared, str):
        raise ChannelError(f"{owner}.configure_channels() returned {declared!r}, not a list")
    channels: dict[str, Channel] = {}
    known: set[str] | None = None
    for channel in declared:
        if not isinstance(channel, Channel):
            raise ChannelError(f"{owner}.configure_channels() holds {channel!r}, not a Channel")
        if channel.name in channels:
            raise ChannelError(
                f"{owner}.configure_channels() declares the channel {channel.name!r} twice"
            )
        if check_tools and channel.tools is not None:
            known = set(agent.tools_by_name()) if known is None else known
            unknown = [t for t in channel.tools if t not in known]
            if unknown:
                raise ChannelError(
                    f"{owner}: channel {channel.name!r} allows tools it does not have: "
                    f"{', '.join(map(repr, unknown))} (its tools: {', '.join(sorted(known))})"
                )
        channels[channel.name] = channel
    return channels


def channel_of(agent: Think, name: str) -> Channel | None:
    """The policy of `name` for this agent; None when it declares none (the agent's own).
    Its tools were checked when the worker started: not again at every step."""
    return declared_channels(agent, check_tools=False).get(name)
