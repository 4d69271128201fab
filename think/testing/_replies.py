"""The replies a player has been scripted with, and what it plays for a call: the one piece of
playing that both players (`FakeOpenAIServer`, `ScriptedModel`) share, apart from the script
language itself (`_script.py`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

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


def plan_of(reply: Reply | None, messages: list[dict[str, Any]]) -> Plan:
    """What to play for a call with `messages`: its scripted reply, or, with none scripted, the
    echo of its last user message."""
    return compile_reply(reply if reply is not None else echo(messages), messages)
