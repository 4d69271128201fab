"""The session an agent configures once (`Think.configure_session`), and its overflow policy.

    class Agent(Think):
        proactive = Proactive(max_input_tokens=128_000)
        context_overflow = ContextOverflow(reactive=True, proactive=proactive)
        classify_chat_error = default_context_overflow_classifier

        def configure_session(self, session: Session) -> Session:
            compaction = create_compact_function(keep_recent_tokens=8_000)
            return session.on_compaction(compaction).compact_after(60_000)

`configure_session` runs once per agent class in each process that needs it (a worker, or an
application calling `ConversationHandle.compact()`), the first time it is needed; the session
it returns is kept for the life of the process (`session_for`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import UserError
from think.sessions._compaction import CompactFunction, TokenCounter, default_token_counter

if TYPE_CHECKING:
    from think.agent import Think


class Session:
    """How an agent's conversations are compacted. Built fluently in `configure_session`:
    `session.on_compaction(fn).compact_after(100_000).token_counter(count)`."""

    def __init__(self) -> None:
        self.compaction: CompactFunction | None = None
        self.threshold: int | None = None
        self.count_tokens: TokenCounter = default_token_counter

    def on_compaction(self, fn: CompactFunction) -> Session:
        """The compaction function (`create_compact_function(...)`, or your own): used after
        turns (`compact_after`), by overflow recovery and by `ConversationHandle.compact()`."""
        if not callable(fn):
            raise UserError(f"on_compaction takes a function, not {fn!r}")
        self.compaction = fn
        return self

    def compact_after(self, tokens: int) -> Session:
        """Compact after a turn that leaves the history (as the model reads it, by the token
        counter) over `tokens`. Set it well above a summary plus the recent messages the
        compaction keeps, or every turn would compact again."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            raise UserError(f"compact_after takes a positive number of tokens, not {tokens!r}")
        self.threshold = tokens
        return self

    def token_counter(self, fn: TokenCounter) -> Session:
        """`(Chat Completions messages) -> tokens`; the default estimates four characters a
        token (`think.default_token_counter`)."""
        if not callable(fn):
            raise UserError(f"token_counter takes a function, not {fn!r}")
        self.count_tokens = fn
        return self

    def __repr__(self) -> str:
        return f"<Session compaction={self.compaction!r} compact_after={self.threshold!r}>"


class Proactive(BaseModel):
    """Compact before a step whose previous step's input (as the provider reported it) came
    over `headroom * max_input_tokens`; at most `max_compactions` times a turn."""

    model_config = ConfigDict(frozen=True)

    max_input_tokens: int = Field(gt=0)
    headroom: float = Field(default=0.9, gt=0, le=1)
    max_compactions: int = Field(default=1, ge=0)

    @property
    def threshold(self) -> int:
        return int(self.max_input_tokens * self.headroom)


class ContextOverflow(BaseModel):
    """Context-window overflow recovery, both layers off unless named (docs/hooks.md).

    `reactive`: a step that fails with an error `classify_chat_error` calls
    `"context_overflow"` is compacted and run again, its partial output dropped, at most
    `max_retries` times a turn. `proactive`: compaction before a step that nears the window.
    Both use the session's compaction function; when it cannot shorten the history the turn
    ends in `error`, and `on_chat_error` sees `classification="context_overflow"`.
    """

    model_config = ConfigDict(frozen=True)

    reactive: bool = False
    max_retries: int = Field(default=1, ge=0)
    proactive: Proactive | None = None


_SESSIONS: weakref.WeakKeyDictionary[type[Think], Session] = weakref.WeakKeyDictionary()
"""One configured session per agent class and process (weak: a class that goes away, say a
test's, takes its session with it)."""


def session_for(agent: Think) -> Session:
    """The agent class's session, configured on first use."""
    cls = type(agent)
    session = _SESSIONS.get(cls)
    if session is None:
        configured = agent.configure_session(Session())
        if not isinstance(configured, Session):
            raise UserError(
                f"{cls.__name__}.configure_session must return the session, not {configured!r}"
            )
        session = _SESSIONS[cls] = configured
    return session
