"""The Python turn API: run, submit and stream turns from application code, scheduled jobs,
hooks and tools, against the service's own Postgres and Temporal (no private event loop).

    service = await ThinkService.connect()             # from THINK_* variables
    conv = service.conversation("assistant", "demo")
    result = await conv.run_turn("Hello!")             # wait: TurnResult
    submission = await conv.submit_messages("Later")   # submit: durable acceptance
    async for chunk in await conv.run_turn("Hi", mode="stream"):
        ...

Admission, waiting and streaming are the gateway's own code (`think.turns._admission`), so a turn
submitted here and one submitted over HTTP are the same thing: same idempotency, same
`message_concurrency`, same records. Inside a worker, hooks and tools reach their own
conversation through `await think.current_conversation()` (or `self.run_turn(...)` on the
agent, `await ctx.conversation()` in a tool); see `think._current` and
`think.agent._conversation_methods`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeAlias, overload

from pydantic import ValidationError
from temporalio.client import Client

from think._current import BOUND, BindTurns, current_conversation
from think._messages import ID, UIMessage
from think._settings import Settings
from think.agent._compactor import compact
from think.agent._registry import AgentRegistry
from think.agent._think import Think
from think.exceptions import UserError
from think.schedules import reconcile_conversation
from think.sessions._context_blocks import check_write, checked_blocks
from think.sessions._session import session_for
from think.storage import (
    Admission,
    Conn,
    Conversation,
    Database,
    MessageConcurrency,
    SearchHit,
    Store,
    TurnNotFound,
    TurnRecord,
    TurnRequest,
    TurnStatus,
    clear_system_prompt,
    conversation_config,
    delete_turn,
    delete_turns,
    open_database,
    read_memory,
    search_messages,
    set_conversation_config,
    upsert_messages,
    write_memory,
)
from think.storage._compactions import Compaction
from think.streaming import ChunkListener
from think.turns import _admission
from think.turns._results import (
    StreamCallback,
    Submission,
    TurnResult,
    result_of,
    submission_of,
)
from think.workflows._connect import connect

__all__ = [
    "BindTurns",
    "ConversationHandle",
    "StreamCallback",
    "Submission",
    "ThinkService",
    "TurnResult",
    "TurnStream",
    "current_conversation",
]

MessageLike: TypeAlias = UIMessage | dict[str, Any]
TurnInput: TypeAlias = str | MessageLike | Sequence[MessageLike]
"""A string (one user message), a UIMessage (or its dict form), or a list of them."""
MessagesFunction: TypeAlias = Callable[
    [list[UIMessage]], Sequence[MessageLike] | Awaitable[Sequence[MessageLike]]
]
"""`(current messages) -> messages`, evaluated at admission (wait and stream modes): return
the new messages, or the current ones followed by the new ones."""


class TurnStream:
    """A submitted turn's UI message chunks: `async for chunk in stream`, from its first
    chunk to its last (`finish`, `error` or `abort`); `await stream.result()` afterwards."""

    def __init__(self, conversation: ConversationHandle, admission: Admission) -> None:
        self._conversation = conversation
        self.turn_id = admission.turn.id
        self.accepted = admission.accepted

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[dict[str, Any]]:
        service = self._conversation.service
        listener = await service.listener()
        async with contextlib.aclosing(
            _admission.follow(service.store, listener, self.turn_id)
        ) as chunks:
            async for _, chunk in chunks:
                yield chunk

    async def result(self, wait_timeout: float | None = None) -> TurnResult:
        return await self._conversation.result(self.turn_id, wait_timeout=wait_timeout)


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
        self, agent: str | type[Think], conversation_id: str, *, tenant: str = "default"
    ) -> ConversationHandle:
        """A conversation of `agent` (a hosted agent's name, or its class); it is created by
        its first turn or message."""
        cls = self.registry.get(agent) if isinstance(agent, str) else agent
        if not ID.fullmatch(conversation_id):
            raise UserError(f"conversation id {conversation_id!r} is not a valid id")
        return ConversationHandle(self, cls, conversation_id, tenant)


class ConversationHandle:
    """One conversation, and everything code can do to it: `run_turn` and its shortcuts,
    messages without a turn, and the submission records."""

    def __init__(
        self, service: ThinkService, agent: type[Think], conversation_id: str, tenant: str
    ) -> None:
        self.service = service
        self.agent = agent
        self.conversation_id = conversation_id
        self.tenant = tenant

    def __repr__(self) -> str:
        return f"<ConversationHandle {self.agent.name}/{self.conversation_id}>"

    # -- turns ---------------------------------------------------------------------------

    @overload
    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = ...,
        *,
        mode: Literal["wait"] = ...,
        idempotency_key: str | None = ...,
        submission_id: str | None = ...,
        parent_id: str | None = ...,
        body: dict[str, Any] | None = ...,
        client_tools: Sequence[dict[str, Any]] = ...,
        concurrency: MessageConcurrency | None = ...,
        continuation: bool = ...,
        wait_timeout: float | None = ...,
    ) -> TurnResult: ...

    @overload
    async def run_turn(
        self,
        input: TurnInput | None = ...,
        *,
        mode: Literal["submit"],
        idempotency_key: str | None = ...,
        submission_id: str | None = ...,
        parent_id: str | None = ...,
        body: dict[str, Any] | None = ...,
        client_tools: Sequence[dict[str, Any]] = ...,
        concurrency: MessageConcurrency | None = ...,
        continuation: bool = ...,
        wait_timeout: float | None = ...,
    ) -> Submission: ...

    @overload
    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = ...,
        *,
        mode: Literal["stream"],
        idempotency_key: str | None = ...,
        submission_id: str | None = ...,
        parent_id: str | None = ...,
        body: dict[str, Any] | None = ...,
        client_tools: Sequence[dict[str, Any]] = ...,
        concurrency: MessageConcurrency | None = ...,
        continuation: bool = ...,
        wait_timeout: float | None = ...,
    ) -> TurnStream: ...

    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = None,
        *,
        mode: Literal["wait", "submit", "stream"] = "wait",
        **options: Any,
    ) -> TurnResult | Submission | TurnStream:
        """Admit a turn: `wait` for its result, `submit` for durable acceptance, or `stream`
        its chunks. Give exactly one of `input` and `continuation=True`.

        `idempotency_key` and/or `submission_id` (the turn id you choose) make a retry safe:
        a known one answers the existing record (`accepted=False`), and a key and an id that
        name different submissions raise `SubmissionConflict`. `concurrency` overrides the
        agent's `message_concurrency` for this submission ("drop" to a busy conversation
        raises `ConversationBusy`). `wait_timeout` bounds a wait (None: no limit).
        """
        return await self.admit_turn(input, mode=mode, **options)

    async def admit_turn(
        self,
        input: TurnInput | MessagesFunction | None = None,
        *,
        mode: Literal["wait", "submit", "stream"] = "wait",
        idempotency_key: str | None = None,
        submission_id: str | None = None,
        parent_id: str | None = None,
        body: dict[str, Any] | None = None,
        client_tools: Sequence[dict[str, Any]] = (),
        concurrency: MessageConcurrency | None = None,
        continuation: bool = False,
        wait_timeout: float | None = None,
    ) -> TurnResult | Submission | TurnStream:
        """`run_turn`, typed by its implementation rather than by mode."""
        if mode not in ("wait", "submit", "stream"):
            raise UserError(f"mode must be 'wait', 'submit' or 'stream', not {mode!r}")
        if continuation == (input is not None):
            raise UserError("give exactly one of input and continuation=True")
        if mode == "submit" and callable(input):
            raise UserError("a function input is for wait and stream modes; submit takes messages")
        if submission_id is not None and not ID.fullmatch(submission_id):
            raise UserError(f"submission_id {submission_id!r} is not a valid id")
        if mode != "submit":
            await self._refuse_nested(f"run_turn(mode={mode!r})")
        admission = await self._admit(
            input,
            idempotency_key=idempotency_key,
            submission_id=submission_id,
            parent_id=parent_id,
            body=body,
            client_tools=client_tools,
            concurrency=concurrency,
            continuation=continuation,
        )
        if mode == "submit":
            return submission_of(admission.turn, accepted=admission.accepted)
        if mode == "stream":
            return TurnStream(self, admission)
        return await self.result(
            admission.turn.id, wait_timeout=wait_timeout, accepted=admission.accepted
        )

    async def save_messages(
        self,
        messages: TurnInput | MessagesFunction,
        *,
        idempotency_key: str | None = None,
        submission_id: str | None = None,
        body: dict[str, Any] | None = None,
        concurrency: MessageConcurrency | None = None,
        wait_timeout: float | None = None,
    ) -> TurnResult:
        """Add messages and run a turn on them, waiting for its result (`run_turn` wait)."""
        return await self.run_turn(
            messages,
            idempotency_key=idempotency_key,
            submission_id=submission_id,
            body=body,
            concurrency=concurrency,
            wait_timeout=wait_timeout,
        )

    async def submit_messages(
        self,
        messages: TurnInput,
        *,
        idempotency_key: str | None = None,
        submission_id: str | None = None,
        parent_id: str | None = None,
        body: dict[str, Any] | None = None,
        concurrency: MessageConcurrency | None = None,
    ) -> Submission:
        """Durably accept a turn and return at once (`run_turn` submit); safe from a tool."""
        return await self.run_turn(
            messages,
            mode="submit",
            idempotency_key=idempotency_key,
            submission_id=submission_id,
            parent_id=parent_id,
            body=body,
            concurrency=concurrency,
        )

    async def continue_last_turn(
        self,
        body: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        wait_timeout: float | None = None,
    ) -> TurnResult:
        """Run the model again after the last assistant message, with no new user message; the
        answer is a new assistant message after it. `skipped` when the last message is not the
        assistant's (checked when the turn comes to run)."""
        return await self.run_turn(
            continuation=True, body=body, idempotency_key=idempotency_key, wait_timeout=wait_timeout
        )

    async def chat(
        self,
        input: TurnInput | MessagesFunction,
        callback: Any,
        *,
        body: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Run a turn, driving `callback` (a `StreamCallback`, or any object with some of its
        methods) with its chunks; returns how it ended."""
        stream = await self.run_turn(
            input, mode="stream", body=body, idempotency_key=idempotency_key
        )
        await _call(callback, "on_start", stream.turn_id)
        error_text: str | None = None
        async for chunk in stream:
            if chunk.get("type") == "error":
                error_text = str(chunk.get("errorText") or "")
            await _call(callback, "on_event", chunk)
        result = await stream.result()
        if result.status == "completed":
            await _call(callback, "on_done")
        elif result.status == "error":
            await _call(callback, "on_error", error_text or result.error or "the turn failed")
        else:
            await _call(callback, "on_interrupted")
        return result

    async def cancel_chat(self, turn_id: str, reason: str = "cancelled") -> bool:
        """Cancel a turn (queued or running; its partial answer is kept). False when it had
        already ended or is not a turn of this conversation: nothing changes then."""
        turn = await self._turn(turn_id)
        if turn is None:
            return False
        service = self.service
        return await _admission.cancel_turn(
            service.store, service.temporal, service.settings.task_queue, turn, reason
        )

    async def result(
        self, turn_id: str, *, wait_timeout: float | None = None, accepted: bool = True
    ) -> TurnResult:
        """Wait for a turn of this conversation to end (or pause for a person), or for
        `wait_timeout` seconds, and say how it stands."""
        await self._refuse_nested("waiting for a turn")
        listener = await self.service.listener()
        turn = await _admission.wait_for_turn(self.service.store, listener, turn_id, wait_timeout)
        return result_of(turn, accepted=accepted)

    # -- messages without a turn -----------------------------------------------------------

    async def messages(self) -> list[UIMessage]:
        """The active path, root first."""
        conv = await self._conversation()
        if conv is None:
            return []
        return await self.service.store.path(conv.uid, conv.active_leaf_id)

    async def search(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Full-text search over every message of the conversation (all branches), best first,
        with `<mark>`-highlighted snippets: what `GET …/search` answers."""
        conv = await self._conversation()
        if conv is None:
            return []
        return await search_messages(self.service.store.db, conv.uid, query, limit=limit)

    async def add_messages(
        self,
        messages: TurnInput,
        *,
        parent_id: str | None = None,
        mode: Literal["append", "upsert"] = "append",
    ) -> list[str]:
        """Write messages to the transcript without a turn; safe inside a turn.

        Appended as a chain under `parent_id` (default: the active leaf), and the active leaf
        moves to the last one. Idempotent by message id: a stored message is left as it is in
        "append" mode (the same id with other content raises `MessageIdConflict`), and is
        updated in place in "upsert" mode. Returns the ids this call wrote.
        """
        if mode not in ("append", "upsert"):
            raise UserError(f"mode must be 'append' or 'upsert', not {mode!r}")
        batch = _messages(messages)
        store = self.service.store
        async with store.db.transaction() as conn:
            conv, _ = await store.ensure_conversation(
                conn,
                tenant=self.tenant,
                agent=self.agent.name,
                conversation_id=self.conversation_id,
            )
        if mode == "upsert":
            updated = await upsert_messages(store, conv.uid, batch, parent_id=parent_id)
            appended = [m.id for m in batch if m.id not in updated]
            return updated + appended
        added = await store.add_messages(conv.uid, batch, parent_id=parent_id)
        return added.inserted

    # -- configuration and context blocks --------------------------------------------------

    async def reconcile_scheduled_tasks(self) -> int:
        """Arm the agent's scheduled tasks for this conversation (its scope must be
        `"conversation"`), evaluated with the conversation's configuration, and delete the
        ones it no longer declares; returns how many are armed."""
        agent = self.agent()
        if agent.get_scheduled_tasks_scope() != "conversation":
            raise UserError(
                f"{self.agent.__name__}'s scheduled tasks are agent-scoped (armed at "
                "worker start); return 'conversation' from get_scheduled_tasks_scope() to "
                "arm them per conversation"
            )
        agent._config = await self.get_config()
        service = self.service
        return await reconcile_conversation(
            service.temporal, service.settings.task_queue, agent, self.tenant, self.conversation_id
        )

    async def get_config(self) -> dict[str, Any]:
        """The conversation's configuration (`{}` when never configured)."""
        conv = await self._conversation()
        if conv is None:
            return {}
        async with self.service.store.db.connection() as conn:
            return await conversation_config(conn, conv.uid)

    async def configure(self, config: dict[str, Any]) -> None:
        """Replace the conversation's configuration: a JSON object that every hook, tool and
        `get_model` of its later activities reads (`get_config()`, `ToolContext.config`)."""
        if not isinstance(config, dict):
            raise UserError(f"a configuration is a JSON object (a dict), not {config!r}")
        try:
            json.dumps(config, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UserError(f"the configuration is not JSON: {exc}") from None
        async with self.service.store.db.transaction() as conn:
            conv = await self._ensure(conn)
            await set_conversation_config(conn, conv.uid, config)

    async def get_context(self) -> dict[str, str]:
        """The memory blocks' contents by label (those written so far)."""
        conv = await self._conversation()
        if conv is None:
            return {}
        async with self.service.store.db.connection() as conn:
            return await read_memory(conn, conv.uid)

    async def set_context(self, label: str, content: str) -> None:
        """Write a memory block of the agent's `configure_context()`, as the model's
        `set_context` tool does (within its `max_tokens`, or `UserError`)."""
        problem = check_write(checked_blocks(self.agent().configure_context()), label, content)
        if problem is not None:
            raise UserError(problem)
        async with self.service.store.db.transaction() as conn:
            conv = await self._ensure(conn)
            await write_memory(conn, conv.uid, label, content)

    async def rebuild_system_prompt(self) -> None:
        """Drop the frozen system prompt: the next model step builds it again from the
        agent's instructions and the context blocks' current content."""
        conv = await self._conversation()
        if conv is None:
            return
        async with self.service.store.db.transaction() as conn:
            await clear_system_prompt(conn, conv.uid)

    # -- compaction ------------------------------------------------------------------------

    async def compact(self) -> Compaction | None:
        """Compact the active path now, whatever its size, with the agent's compaction
        function (`configure_session`): older messages read as one summary for the model,
        while every message stays stored and listed. Runs here, in this process (the
        summarising model call included). Returns the stored summary, or None when there was
        nothing to summarise or the summary would not have been shorter."""
        agent = self.agent()
        if session_for(agent).compaction is None:
            raise UserError(
                f"agent {self.agent.name!r} has no compaction function: its configure_session "
                "must call session.on_compaction(...)"
            )
        conv = await self._conversation()
        if conv is None or conv.active_leaf_id is None:
            return None
        return await compact(
            self.service.store,
            self.service.settings,
            agent,
            conversation_uid=conv.uid,
            conversation_id=self.conversation_id,
            leaf_id=conv.active_leaf_id,
            trigger="manual",
        )

    # -- submission records ----------------------------------------------------------------

    async def get_submission(self, turn_id: str) -> Submission | None:
        turn = await self._turn(turn_id)
        return submission_of(turn) if turn else None

    async def list_submissions(
        self, *, status: Sequence[TurnStatus] = (), limit: int = 100
    ) -> list[Submission]:
        """Newest first, optionally only those in the given statuses."""
        conv = await self._conversation()
        if conv is None:
            return []
        turns = await self.service.store.list_turns(conv.uid, status=status, limit=limit)
        return [submission_of(t) for t in turns]

    async def delete_submission(self, turn_id: str) -> None:
        """Delete an ended submission and its stream (never its messages). Raises
        `TurnNotFound`, or `TurnStillActive` for one that has not ended (cancel it first)."""
        conv = await self._conversation()
        if conv is None:
            raise TurnNotFound(turn_id)
        await delete_turn(self.service.store, conv.uid, turn_id)

    async def delete_submissions(
        self, *, status: Sequence[TurnStatus] = (), before: datetime | None = None
    ) -> list[str]:
        """Delete the ended submissions (in these statuses, created before `before`); active
        ones are never touched. Returns the deleted ids."""
        conv = await self._conversation()
        if conv is None:
            return []
        return await delete_turns(self.service.store, conv.uid, status=status, before=before)

    # -- internals -------------------------------------------------------------------------

    async def _conversation(self) -> Conversation | None:
        return await self.service.store.get_conversation(
            tenant=self.tenant, agent=self.agent.name, conversation_id=self.conversation_id
        )

    async def _ensure(self, conn: Conn) -> Conversation:
        conv, _ = await self.service.store.ensure_conversation(
            conn, tenant=self.tenant, agent=self.agent.name, conversation_id=self.conversation_id
        )
        return conv

    async def _turn(self, turn_id: str) -> TurnRecord | None:
        conv = await self._conversation()
        if conv is None:
            return None
        return await self.service.store.get_turn(turn_id, conv.uid)

    async def _inside_own_turn(self) -> TurnRecord | None:
        """The active turn of this conversation that the calling code runs in, if any."""
        binding = BOUND.get()
        if binding is None:
            return None
        turn = await binding.turn(fresh=True)
        mine = (turn.tenant, turn.agent, turn.conversation_id) == (
            self.tenant,
            self.agent.name,
            self.conversation_id,
        )
        return turn if mine and not turn.terminal else None

    async def _refuse_nested(self, what: str) -> None:
        turn = await self._inside_own_turn()
        if turn is not None:
            raise UserError(
                f"{what} inside turn {turn.id!r} of conversation {self.conversation_id!r} "
                "would wait for a turn that can only start after this one ends (a deadlock); "
                'use run_turn(..., mode="submit") or submit_messages() to run it after this '
                "turn, or add_messages() to add to the transcript without a turn"
            )

    async def _admit(
        self,
        input: TurnInput | MessagesFunction | None,
        *,
        idempotency_key: str | None,
        submission_id: str | None,
        parent_id: str | None,
        body: dict[str, Any] | None,
        client_tools: Sequence[dict[str, Any]],
        concurrency: MessageConcurrency | None,
        continuation: bool,
    ) -> Admission:
        override: str | None = concurrency
        if override is None and await self._inside_own_turn() is not None:
            # From inside a turn of this conversation, a submission waits for it, whatever the
            # agent's mode: "latest" or "interrupt" would cancel the very turn submitting it.
            override = "queue"
        mode, debounce = _admission.resolve_concurrency(self.agent, override)
        tools = [_client_tool(t) for t in client_tools]
        fingerprint: dict[str, Any] = {
            "parent_id": parent_id,
            "body": body or {},
            "client_tools": tools,
        }
        messages: list[UIMessage] = []
        if continuation:
            fingerprint["continuation"] = True
        elif callable(input):
            messages = await self._evaluate(input)
            fingerprint["input"] = [m.model_dump(mode="json") for m in messages]
        else:
            assert input is not None
            messages = _messages(input)
            fingerprint["input"] = input if isinstance(input, str) else _input_json(input, messages)
        if concurrency is not None:
            fingerprint["concurrency"] = concurrency
        if submission_id is not None:
            fingerprint["submission_id"] = submission_id
        request = TurnRequest(
            messages=messages,
            parent_id=parent_id,
            body=body or {},
            client_tools=tools,
            concurrency=mode,
            debounce_seconds=debounce,
            continuation=continuation,
        )
        return await _admission.admit(
            self.service.store,
            self.service.temporal,
            self.service.settings.task_queue,
            tenant=self.tenant,
            agent=self.agent.name,
            conversation_id=self.conversation_id,
            request=request,
            request_hash=_admission.request_hash(fingerprint),
            idempotency_key=idempotency_key,
            submission_id=submission_id,
        )

    async def _evaluate(self, fn: MessagesFunction) -> list[UIMessage]:
        current = await self.messages()
        answer = fn(list(current))
        produced = await answer if inspect.isawaitable(answer) else answer
        known = {m.id for m in current}
        fresh = [m for m in _messages(list(produced)) if m.id not in known]
        if not fresh:
            raise UserError("the messages function added no message")
        return fresh


def _messages(value: TurnInput) -> list[UIMessage]:
    """Messages from a string, a message or a list of them; empty input is refused here,
    before anything is stored."""
    if isinstance(value, str):
        if not value.strip():
            raise UserError("input must not be empty")
        return [UIMessage.user_text(value)]
    items: Sequence[MessageLike] = [value] if isinstance(value, UIMessage | dict) else value
    if not items:
        raise UserError("input must hold at least one message")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(item if isinstance(item, UIMessage) else UIMessage.model_validate(item))
        except ValidationError as exc:
            raise UserError(f"input message {i} is not a UIMessage: {exc}") from None
    return out


def _input_json(value: MessageLike | Sequence[MessageLike], messages: list[UIMessage]) -> Any:
    """The input as HTTP's body would carry it, for the request hash."""
    dumped = [m.model_dump(mode="json") for m in messages]
    return dumped[0] if isinstance(value, UIMessage | dict) else dumped


def _client_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(tool.get("name"), str):
        raise UserError(f"a client tool needs a name: {tool!r}")
    return {
        "name": tool["name"],
        "description": str(tool.get("description") or ""),
        "input_schema": tool.get("input_schema") or {"type": "object"},
    }


async def _call(callback: Any, name: str, *args: Any) -> None:
    method = getattr(callback, name, None)
    if method is None:
        return
    answer = method(*args)
    if inspect.isawaitable(answer):
        await answer
