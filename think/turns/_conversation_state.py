"""What a conversation holds besides its turns, as Python code reaches it: its transcript
(messages written without a turn, search), its configuration, context blocks, MCP servers and
workspace, compaction, the records of its submissions, and forking, clearing and deleting it
(`think.turns._conversation_lifecycle`). `ConversationHandle` (`think.turns._conversation`)
adds running its turns.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from think._current import BOUND
from think._messages import UIMessage, new_id
from think.agent import (
    GatewayContext,
    Submission,
    Think,
    TurnInput,
    bind_config,
    compact,
    gateway_of,
    messages_of,
)
from think.exceptions import UserError
from think.schedules import reconcile_conversation
from think.sessions import check_write, checked_blocks, session_for
from think.storage import (
    Compaction,
    Conn,
    Conversation,
    ForkPointNotFound,
    SearchHit,
    TurnNotFound,
    TurnRecord,
    TurnStatus,
    Workspace,
    WorkspaceLimits,
    clear_system_prompt,
    conversation_config,
    conversation_mcp_servers,
    delete_conversation_mcp_server,
    delete_turn,
    delete_turns,
    fork_conversation,
    public_turn_id,
    put_conversation_mcp_server,
    read_memory,
    search_messages,
    set_conversation_config,
    upsert_messages,
    write_memory,
)
from think.tools import McpServer
from think.turns._conversation_lifecycle import clear_conversation, delete_conversation
from think.turns._views import turn_view

if TYPE_CHECKING:
    from think.turns._service import ThinkService

ReadT = TypeVar("ReadT")

_RUN_AFTER = (
    'use run_turn(..., mode="submit") or submit_messages() to run it after this turn, or '
    "add_messages() to add to the transcript without a turn"
)
_OUTSIDE = (
    "do it from outside the conversation's turns: application code, a scheduled handler, or "
    "on_chat_response, which runs once the turn is over"
)


class ConversationState:
    """One conversation of one agent and tenant, and what it holds (its turns are run by
    `ConversationHandle`, this class's one subclass)."""

    def __init__(
        self, service: ThinkService, agent: type[Think], conversation_id: str, tenant: str
    ) -> None:
        self.service = service
        self.agent = agent
        self.conversation_id = conversation_id
        self.tenant = tenant

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
            conv = await self._ensure(conn)
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
        the conversation when it does not exist yet. Its writes are bounded as the tools' are
        (`WorkspaceQuotaError` past the deployment's limits)."""
        async with self.service.store.db.transaction() as conn:
            conv = await self._ensure(conn)
        limits = WorkspaceLimits.from_settings(self.service.settings)
        return Workspace(self.service.store.db, conv.uid, limits)

    async def get_config(self) -> dict[str, Any]:
        """The conversation's configuration (`{}` when never configured)."""
        return await self._read(conversation_config, {})

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
        specs: list[dict[str, Any]] = await self._read(conversation_mcp_servers, [])
        return [McpServer.model_validate(spec) for spec in specs]

    async def get_context(self) -> dict[str, str]:
        """The memory blocks' contents by label (those written so far)."""
        return await self._read(read_memory, {})

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

    # -- forks -----------------------------------------------------------------------------

    async def fork(
        self, message_id: str, *, id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Self:
        """A new conversation of this agent and tenant whose history is a copy of this one's
        path up to `message_id` (its active leaf): the messages, the summaries over them and
        the configuration; not the turns, the workspace or the memory blocks. Its handle.
        Raises `ForkPointNotFound` (no such message here) or `ForkTargetExists` (`id` taken)."""
        conv = await self._conversation()
        if conv is None:
            raise ForkPointNotFound(message_id, self.conversation_id)
        forked = await fork_conversation(
            self.service.store,
            conv,
            message_id=message_id,
            conversation_id=id or new_id("conv"),
            metadata=metadata,
        )
        return type(self)(self.service, self.agent, forked.id, self.tenant)

    # -- clearing and deleting --------------------------------------------------------------

    async def clear(self) -> None:
        """Clear the conversation, as `POST …/clear` does (Think's `chat-clear`): its waiting
        submissions end `skipped` and its running or paused turn is cancelled (those records
        stay, saying so), the records of the turns that had ended go, the next turn starts
        afresh (the history kept off the active path, or deleted: the agent's
        `clear_history`) and the system prompt is built again. Its configuration, workspace,
        memory blocks, MCP servers and schedules stay. Nothing to do for a conversation that
        does not exist. Not from inside one of its own turns (it would wait for that turn to
        end): `UserError`."""
        await self._refuse_nested("clearing the conversation", _OUTSIDE)
        conv = await self._conversation()
        if conv is None:
            return
        service = self.service
        await clear_conversation(
            service.store, service.temporal, service.settings.task_queue, self.agent, conv
        )

    async def delete(self) -> bool:
        """Delete the conversation and everything of it, as `DELETE …/conversations/{cid}`
        does: its schedules, its turns (the running one cancelled first), messages,
        configuration, memory blocks, MCP servers and workspace. False when it did not exist.
        A later turn or message starts a new, empty conversation of the same id. Not from
        inside one of its own turns: `UserError`."""
        await self._refuse_nested("deleting the conversation", _OUTSIDE)
        conv = await self._conversation()
        if conv is None:
            return False
        service = self.service
        await delete_conversation(
            service.store, service.temporal, service.settings.task_queue, self.agent, conv
        )
        return True

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
            gateway=gateway_of(
                agent,
                GatewayContext(
                    tenant=conv.tenant,
                    agent=agent.name,
                    conversation_id=self.conversation_id,
                    turn_id="",
                    step=0,
                    trigger="manual",
                    purpose="compaction",
                ),
            ),
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
        await delete_turn(self.service.store, conv, turn_id)

    async def delete_submissions(
        self, *, status: Sequence[TurnStatus] = (), before: datetime | None = None
    ) -> list[str]:
        """Delete the ended submissions (in these statuses, created before `before`); active
        ones are never touched. Returns the deleted ids."""
        conv = await self._conversation()
        if conv is None:
            return []
        deleted = await delete_turns(self.service.store, conv.uid, status=status, before=before)
        return [public_turn_id(turn_id) for turn_id in deleted]

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

    async def _read(self, read: Callable[[Conn, str], Awaitable[ReadT]], default: ReadT) -> ReadT:
        """What `read` finds of this conversation (given its uid), in one connection; `default`
        when the conversation does not exist yet, so nothing is created to read it."""
        conv = await self._conversation()
        if conv is None:
            return default
        async with self.service.store.db.connection() as conn:
            return await read(conn, conv.uid)

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

    async def _refuse_nested(self, what: str, instead: str = _RUN_AFTER) -> None:
        """Refuse, naming `what` and what to do `instead`, a call that would wait for the
        turn of this conversation that the calling code runs in (a deadlock)."""
        turn = await self._inside_own_turn()
        if turn is not None:
            raise UserError(
                f"{what} inside turn {public_turn_id(turn.id)!r} of conversation "
                f"{self.conversation_id!r} would wait for that turn to end, which it cannot "
                f"while this waits (a deadlock); {instead}"
            )

    async def _turn(self, turn_id: str) -> TurnRecord | None:
        """The conversation's turn named `turn_id` as a door showed it (or as it is stored)."""
        conv = await self._conversation()
        if conv is None:
            return None
        return await self.service.store.find_turn(conv, turn_id)
