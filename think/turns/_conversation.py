"""One conversation as Python code reaches it (`ConversationHandle`): run, submit and stream
its turns through the one front door (`think.turns._admission.admit_submission`), write
messages without a turn, its configuration and context blocks, compaction, and its submission
records. `ThinkService.conversation(...)` makes one; inside a worker, hooks and tools reach
their own through `current_conversation()`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, overload

from think._current import BOUND
from think._messages import ID, UIMessage
from think.agent._agent_tool import AgentToolResult, answer_text, child_conversation_id
from think.agent._compactor import compact
from think.agent._conversation_methods import bind_config
from think.agent._think import Think
from think.exceptions import UserError
from think.schedules import reconcile_conversation
from think.sessions._context_blocks import check_write, checked_blocks
from think.sessions._session import session_for
from think.storage import (
    ACTIVE_STATUSES,
    Admission,
    Conn,
    Conversation,
    MessageConcurrency,
    SearchHit,
    TurnNotFound,
    TurnRecord,
    TurnStatus,
    Workspace,
    clear_system_prompt,
    conversation_config,
    conversation_mcp_servers,
    delete_conversation_mcp_server,
    delete_turn,
    delete_turns,
    put_conversation_mcp_server,
    read_memory,
    search_messages,
    set_conversation_config,
    upsert_messages,
    write_memory,
)
from think.storage._compactions import Compaction
from think.tools import McpServer
from think.turns._admission import admit_submission, cancel_turn, wait_for_turn
from think.turns._results import Submission, TurnResult
from think.turns._stream import TurnStream, call_back
from think.turns._turn_input import (
    MessagesFunction,
    TurnInput,
    client_tool_spec,
    input_json,
    messages_of,
)
from think.turns._views import turn_view

if TYPE_CHECKING:
    from think.turns._service import ThinkService

log = logging.getLogger("think.turns")


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
            return turn_view(admission.turn, accepted=admission.accepted).submission()
        if mode == "stream":
            return TurnStream(self, admission)
        try:
            return await self.result(
                admission.turn.id, wait_timeout=wait_timeout, accepted=admission.accepted
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._caller_cancelled(admission.turn.id))
            raise

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
        methods) with its chunks; returns how it ended.

        `on_start(request_id)` first; `on_event(chunk)` per chunk; `on_interrupted()` each time
        an attempt is interrupted and a retry (the continuation) takes over the step, whose
        partial output the stream then discards (`reset-step`): keep the channel open, the
        continuation owns the answer. The call ends with exactly one of `on_done()` (the turn
        completed, or was skipped) and `on_error(message)` (it failed, was cancelled, or ran
        out of recovery): never `on_interrupted`, which is not an ending.

        Cancelling the awaiting task (`asyncio`) cancels the turn, for a call made outside a
        turn (inside one, only when that turn is being cancelled too), its partial answer kept.
        """
        stream = await self.run_turn(
            input, mode="stream", body=body, idempotency_key=idempotency_key
        )
        try:
            return await self._drive(stream, callback)
        except asyncio.CancelledError:
            await asyncio.shield(self._caller_cancelled(stream.turn_id))
            raise

    async def _drive(self, stream: TurnStream, callback: Any) -> TurnResult:
        await call_back(callback, "on_start", stream.turn_id)
        error_text: str | None = None
        async for chunk in stream:
            kind = chunk.get("type")
            if kind == "error":
                error_text = str(chunk.get("errorText") or "")
            await call_back(callback, "on_event", chunk)
            if kind == "reset-step":
                await call_back(callback, "on_interrupted")
        result = await stream.result()
        if result.status in ("completed", "skipped"):
            await call_back(callback, "on_done")
        elif result.status == "aborted":
            await call_back(callback, "on_error", f"aborted: {result.error or 'cancelled'}")
        else:
            await call_back(callback, "on_error", error_text or result.error or "the turn failed")
        return result

    async def cancel_chat(self, turn_id: str, reason: str = "cancelled") -> bool:
        """Cancel a turn (queued or running; its partial answer is kept). False when it had
        already ended or is not a turn of this conversation: nothing changes then."""
        turn = await self._turn(turn_id)
        if turn is None:
            return False
        service = self.service
        return await cancel_turn(
            service.store, service.temporal, service.settings.task_queue, turn, reason
        )

    async def abort_request(self, request_id: str, reason: str = "cancelled") -> bool:
        """`cancel_chat` by the spec's other name (Think's `abortRequest`)."""
        return await self.cancel_chat(request_id, reason)

    async def abort_all_requests(self, reason: str = "cancelled") -> list[str]:
        """Cancel every active turn of the conversation (queued, running or paused; Think's
        `abortAllRequests`), partial answers kept. Returns the ids it cancelled."""
        conv = await self._conversation()
        if conv is None:
            return []
        service = self.service
        active = await service.store.list_turns(conv.uid, status=sorted(ACTIVE_STATUSES))
        cancelled = []
        # Newest first: a queued turn is aborted before the running one ends and starts it.
        for turn in active:
            if await cancel_turn(
                service.store, service.temporal, service.settings.task_queue, turn, reason
            ):
                cancelled.append(turn.id)
        return cancelled

    def sub_agent(self, agent: type[Think], name: str) -> ConversationHandle:
        """The child conversation `name` of this one, of agent `agent`: same tenant, its id
        derived from this conversation's agent and id and `name` (`lead.c1.child-1`). The
        deployment must host `agent`: list it in the parent's `sub_agents`, or use it in one of
        the parent's `agent_tool`s."""
        if agent.name not in self.service.registry:
            raise UserError(
                f"agent {agent.name!r} is not hosted here, so its turns would never run: add "
                f"it to {self.agent.__name__}.sub_agents (or THINK_AGENTS)"
            )
        child = child_conversation_id(self.agent.name, self.conversation_id, name)
        return ConversationHandle(self.service, agent, child, self.tenant)

    async def run_agent_tool(
        self,
        agent: type[Think],
        input: str,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        wait_timeout: float | None = None,
    ) -> AgentToolResult:
        """Delegate `input` to `agent` from code, as the parent's agent tool `name` (default:
        the agent's name) would from the model: a turn of the same retained child
        conversation, waited for (Think's `runAgentTool`). Returns what the tool would have
        recorded, with `error` set when the child's turn failed or was cancelled. Pass an
        `idempotency_key` (from a tool, its `ctx.idempotency_key`) so that a retried caller
        re-attaches to the child's turn instead of starting another."""
        child = self.sub_agent(agent, name or agent.name)
        result = await child.save_messages(
            input, idempotency_key=idempotency_key, wait_timeout=wait_timeout
        )
        message = result.message.model_dump(mode="json") if result.message else None
        return AgentToolResult(
            agent=agent.name,
            conversation_id=child.conversation_id,
            turn_id=result.turn_id,
            status=result.status,
            text=answer_text(message),
            error=result.error if result.status != "completed" else None,
        )

    async def _caller_cancelled(self, turn_id: str) -> None:
        """The task awaiting a turn it started was cancelled: cancel the turn too, unless the
        caller serves a turn that is not itself being cancelled (a worker shutting down
        cancels its activities; their retry re-attaches to the same turn)."""
        binding = BOUND.get()
        if binding is not None:
            serving = await binding.turn(fresh=True)
            if not serving.terminal and serving.error is None:
                return
        turn = await self._turn(turn_id)
        if turn is None:
            return
        try:
            service = self.service
            await cancel_turn(
                service.store,
                service.temporal,
                service.settings.task_queue,
                turn,
                "the caller was cancelled",
            )
        except Exception:
            log.warning("could not cancel turn %s after its caller was", turn_id, exc_info=True)

    async def result(
        self, turn_id: str, *, wait_timeout: float | None = None, accepted: bool = True
    ) -> TurnResult:
        """Wait for a turn of this conversation to end (or pause for a person), or for
        `wait_timeout` seconds, and say how it stands."""
        await self._refuse_nested("waiting for a turn")
        listener = await self.service.listener()
        turn = await wait_for_turn(self.service.store, listener, turn_id, wait_timeout)
        return turn_view(turn, accepted=accepted).result()

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
        batch = messages_of(messages)
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

    async def workspace(self) -> Workspace:
        """The conversation's workspace (`read`, `list`, `write`, `delete`): the files its
        workspace tools see, e.g. to put a file there before a turn or read one after. Creates
        the conversation when it does not exist yet."""
        async with self.service.store.db.transaction() as conn:
            conv = await self._ensure(conn)
        return Workspace(self.service.store.db, conv.uid)

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

    # -- MCP servers of this conversation (docs/mcp.md) -----------------------------------

    async def add_mcp_server(self, server: McpServer) -> None:
        """Add (or replace, by name) an MCP server to this conversation: its tools join the
        agent's from the next turn on. Stored as data, so a secret must be named by an
        environment variable of the workers (`headers_from_env`, `env_from`), never given."""
        if not isinstance(server, McpServer):
            raise UserError(f"add_mcp_server takes an McpServer, not {server!r}")
        server.check_storable()
        agent = self.agent()
        bind_config(agent, await self.get_config())
        if any(s.name == server.name for s in agent.get_mcp_servers()):
            raise UserError(
                f"the agent {self.agent.name!r} declares an MCP server named {server.name!r} "
                "already; give the conversation's server another name"
            )
        async with self.service.store.db.transaction() as conn:
            conv = await self._ensure(conn)
            await put_conversation_mcp_server(
                conn, conv.uid, server.name, server.model_dump(mode="json")
            )

    async def remove_mcp_server(self, name: str) -> bool:
        """Remove a server `add_mcp_server` added; False when there was none by that name."""
        conv = await self._conversation()
        if conv is None:
            return False
        async with self.service.store.db.transaction() as conn:
            return await delete_conversation_mcp_server(conn, conv.uid, name)

    async def mcp_servers(self) -> list[McpServer]:
        """The servers added to this conversation (the agent's own are `get_mcp_servers()`)."""
        conv = await self._conversation()
        if conv is None:
            return []
        async with self.service.store.db.connection() as conn:
            specs = await conversation_mcp_servers(conn, conv.uid)
        return [McpServer.model_validate(spec) for spec in specs]

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
        return turn_view(turn).submission() if turn else None

    async def list_submissions(
        self, *, status: Sequence[TurnStatus] = (), limit: int = 100
    ) -> list[Submission]:
        """Newest first, optionally only those in the given statuses."""
        conv = await self._conversation()
        if conv is None:
            return []
        turns = await self.service.store.list_turns(conv.uid, status=status, limit=limit)
        return [turn_view(t).submission() for t in turns]

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
        # From inside a turn of this conversation, a submission waits for it, whatever the
        # agent's mode: "latest" or "interrupt" would cancel the very turn submitting it.
        inside = concurrency is None and await self._inside_own_turn() is not None
        messages: list[UIMessage] = []
        given: Any = None
        if callable(input):
            messages = await self._evaluate(input)
            given = [m.model_dump(mode="json") for m in messages]
        elif input is not None:
            messages = messages_of(input)
            given = input_json(input, messages)
        service = self.service
        return await admit_submission(
            service.store,
            service.temporal,
            service.settings.task_queue,
            self.agent,
            tenant=self.tenant,
            conversation_id=self.conversation_id,
            messages=messages,
            input=given,
            parent_id=parent_id,
            body=body,
            client_tools=[client_tool_spec(t) for t in client_tools],
            concurrency=concurrency,
            default_concurrency="queue" if inside else None,
            submission_id=submission_id,
            continuation=continuation,
            idempotency_key=idempotency_key,
        )

    async def _evaluate(self, fn: MessagesFunction) -> list[UIMessage]:
        current = await self.messages()
        answer = fn(list(current))
        produced = await answer if inspect.isawaitable(answer) else answer
        known = {m.id for m in current}
        fresh = [m for m in messages_of(list(produced)) if m.id not in known]
        if not fresh:
            raise UserError("the messages function added no message")
        return fresh
