"""The replies a player has been scripted with, and what it plays for a call: the one piece of
playing that both players (`FakeOpenAIServer`, `ScriptedModel`) share, apart from the script
language itself (`_script.py`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from think.models import estimate_tokens, last_user_text, message_text
from think.testing._script import Plan, Reply, compile_reply, echo


class ReplyQueue:
    """Scripted replies, taken in order: each once, or round and round once `repeat` is set."""

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.repeat = False

    def add(self, replies: Iterable[Reply], *, repeat: bool = False) -> None:
        """Queue more replies; `repeat` makes the queue cycle them forever (it stays so)."""
        self.replies.extend(replies)
        self.repeat = self.repeat or repeat

    @property
    def pending(self) -> int:
        """Replies not played yet. A `repeat` queue never runs out, so it counts as 0."""
        return 0 if self.repeat else len(self.replies)

    def take(self) -> Reply | None:
        """The next reply, or None when there is none left."""
        if not self.replies:
            return None
        reply = self.replies.popleft()
        if self.repeat:
            self.replies.append(reply)
        return reply


@dataclass(frozen=True)
class Heard:
    """What a player takes from a call's transcript: the input tokens it reports (a stand-in
    for a tokenizer's count) and the last user message's text, which it echoes when nothing is
    scripted. Both add up message by message, so a transcript that only grew since the last
    call is heard from where it grew (`extended`)."""

    input_tokens: int
    last_user_text: str
    begun: str = ""
    """The text of the transcript's last message when that is the assistant's: an answer
    begun (a partial kept after a crash) that this call continues."""

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> Heard:
        return cls(estimate_tokens(messages), last_user_text(messages), _begun(messages))

    def extended(self, more: list[dict[str, Any]]) -> Heard:
        """What `of(messages + more)` would be, for `self = of(messages)`."""
        user = next((m for m in reversed(more) if m.get("role") == "user"), None)
        return Heard(
            self.input_tokens + estimate_tokens(more),
            self.last_user_text if user is None else message_text(user),
            _begun(more) if more else self.begun,
        )


def _begun(messages: list[dict[str, Any]]) -> str:
    last = messages[-1] if messages else None
    return message_text(last) if last is not None and last.get("role") == "assistant" else ""


def plan_of(reply: Reply | None, heard: Heard) -> Plan:
    """What to play for a call whose transcript is `heard`: its scripted reply, or, with none
    scripted, the echo of its last user message."""
    if reply is None:
        reply = echo(heard.last_user_text)
    elif reply.continues:
        reply = reply.continued_after(heard.begun)
    return compile_reply(reply, heard.input_tokens)
