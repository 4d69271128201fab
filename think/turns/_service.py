"""The Python turn API: run, submit and stream turns from application code, scheduled jobs,
hooks and tools, against the service's own Postgres and Temporal (no private event loop).

    service = await ThinkService.connect()             # from THINK_* variables
    conv = service.conversation("assistant", "demo")
    result = await conv.run_turn("Hello!")             # wait: TurnResult
    submission = await conv.submit_messages("Later")   # submit: durable acceptance
    async for chunk in await conv.run_turn("Hi", mode="stream"):
        ...

Admission, waiting and streaming are the gateway's own code (`think.turns._admission`), so a
turn submitted here and one submitted over HTTP are the same thing: same idempotency (one
fingerprint, `think.turns._fingerprint`), same `message_concurrency`, same records, and the
same view of them (`think.turns._views`). Inside a worker, hooks and tools reach their own
conversation through `await think.current_conversation()` (or `self.run_turn(...)` on the
agent, `await ctx.conversation()` in a tool); see `think._current` and
`think.agent._conversation_methods`.

This module holds the service and its connections; one conversation's methods are in
`think.turns._conversation` (what it holds besides its turns: `think.turns._conversation_state`),
streams in `think.turns._stream`; the input forms (`think.agent._turn_input`) and the answers
(`think.agent._turn_results`) live with the agent, whose turn API (`TurnAPI`) takes and answers
them. Their names are re-exported here, where the rest of `think` imports them from.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from temporalio.client import Client

from think._current import BindTurns, current_conversation
from think._messages import ID
from think._settings import Settings
from think.agent import (
    AgentRegistry,
    MessageLike,
    MessagesFunction,
    StreamCallback,
    Submission,
    Think,
    TurnInput,
    TurnResult,
)
from think.exceptions import UserError
from think.storage import Database, Store, open_database
from think.streaming import ChunkListener
from think.turns._conversation import ConversationHandle
from think.turns._stream import TurnStream
from think.workflows import connect

__all__ = [
    "BindTurns",
    "ConversationHandle",
    "MessageLike",
    "MessagesFunction",
    "StreamCallback",
    "Submission",
    "ThinkService",
    "TurnInput",
    "TurnResult",
    "TurnStream",
    "current_conversation",
]


class ThinkService:
    """The service's Postgres and Temporal, for code that runs turns.

    `await ThinkService.connect(settings)` opens its own pool and client (and `close()` closes
    them; `async with` does it for you); inside a worker the framework builds one from the
    worker's own, which hooks and tools reach through `current_conversation()`.
    """

    def __init__(
        self,
        *,
        store: Store,
        temporal: Client,
        settings: Settings,
        registry: AgentRegistry | None = None,
    ) -> None:
        self.store = store
        self.temporal = temporal
        self.settings = settings
        self.registry = registry or AgentRegistry.from_paths(settings.agents)
        self._listener: ChunkListener | None = None
        self._listener_lock = asyncio.Lock()
        self._owned: Database | None = None

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> ThinkService:
        """Connect to the deployment `settings` describe (default: the THINK_* variables)."""
        settings = settings or Settings.from_env()
        registry = AgentRegistry.from_paths(settings.agents)
        db = await open_database(settings, max_size=5)
        try:
            temporal = await connect(settings)
        except BaseException:
            await db.close()
            raise
        service = cls(store=Store(db), temporal=temporal, settings=settings, registry=registry)
        service._owned = db
        return service

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        if self._owned is not None:
            await self._owned.close()
            self._owned = None

    async def __aenter__(self) -> ThinkService:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def listener(self) -> ChunkListener:
        """The process's LISTEN connection for this service, opened on first use."""
        async with self._listener_lock:
            if self._listener is None:
                listener = ChunkListener(self.settings.libpq_url)
                await listener.start()
                self._listener = listener
            return self._listener

    def conversation(
        self, agent: str | type[Think], conversation_id: str, *, tenant: str | None = None
    ) -> ConversationHandle:
        """A conversation of `agent` (a hosted agent's name, or its class); it is created by
        its first turn or message. `tenant`: unset, that of keyless requests
        (`THINK_DEFAULT_TENANT`), so a script sees what the chat page made without keys."""
        cls = self.registry.get(agent) if isinstance(agent, str) else agent
        if not ID.fullmatch(conversation_id):
            raise UserError(f"conversation id {conversation_id!r} is not a valid id")
        return ConversationHandle(
            self, cls, conversation_id, self.settings.default_tenant if tenant is None else tenant
        )
