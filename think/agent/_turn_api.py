"""The Python turn API's typed face, written once for the three things that offer it: a
conversation's handle (`think.turns.ConversationHandle`), the agent itself
(`self.run_turn(...)`, through `ConversationMethods`) and a sub-agent's handle (`SubAgent`).

`run_turn` answers by its `mode`, and its overloads tell a type checker which answer a call
gets: a `TurnResult` ("wait", the default), a `Submission` ("submit") or a `TurnStream`
("stream"). `save_messages`, `submit_messages` and `continue_last_turn` are `run_turn` in one
mode, so they are written here once too. Each of the three reaches the conversation it runs
turns on through `conversation()`, whose `admit_turn` does the work
(`think.turns._conversation`). The `TypedDict`s name the keyword options of these methods,
and of those the agent and `SubAgent` pass on to the handle (`add_messages`, `chat`).

`agent` sits below `turns` in the layers, so it names what it asks of the turns package as
protocols: `TurnConversation` (the conversation it runs turns on; `think.turns`'
`ConversationHandle` is the one implementation) and `StreamedTurn` (a turn streamed by
`run_turn(mode="stream")`; `think.turns.TurnStream`). The values that cross between them, the
turn's input (`TurnInput`, `MessagesFunction`) and its answers (`TurnResult`, `Submission`),
are defined here in `agent`, and `turns` builds them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack, overload

from think._messages import UIMessage
from think._protocol import UIMessageChunk
from think.agent._turn_input import MessagesFunction, TurnInput
from think.agent._turn_results import Submission, TurnResult
from think.storage import MessageConcurrency

if TYPE_CHECKING:
    from think.agent._agent_tool import AgentToolResult
    from think.agent._think import Think
    from think.tools import McpServer


class _SubmissionOptions(TypedDict, total=False):
    """What every way of submitting a turn takes (`TurnAPI.run_turn` says what they do)."""

    idempotency_key: str | None
    submission_id: str | None
    body: dict[str, Any] | None
    concurrency: MessageConcurrency | None


class SubmitOptions(_SubmissionOptions, total=False):
    """`submit_messages`' keyword options, each optional."""

    parent_id: str | None


class SaveOptions(_SubmissionOptions, total=False):
    """`save_messages`' keyword options, each optional."""

    wait_timeout: float | None


class TurnOptions(SubmitOptions, SaveOptions, total=False):
    """`run_turn`'s keyword options, each optional."""

    client_tools: Sequence[dict[str, Any]]
    continuation: bool


class AddOptions(TypedDict, total=False):
    """`add_messages`' keyword options, each optional (`ConversationHandle.add_messages`)."""

    parent_id: str | None
    mode: Literal["append", "upsert"]


class ChatOptions(TypedDict, total=False):
    """`chat`'s keyword options, each optional (`ConversationHandle.chat`)."""

    body: dict[str, Any] | None
    idempotency_key: str | None


class AgentToolRunOptions(TypedDict, total=False):
    """`run_agent_tool`'s keyword options, each optional (`ConversationHandle.run_agent_tool`)."""

    idempotency_key: str | None
    wait_timeout: float | None


class StreamedTurn(Protocol):
    """A turn `run_turn(mode="stream")` admitted: `async for chunk in stream`, from its first
    chunk to its last (`finish`, `error` or `abort`); `await stream.result()` afterwards.
    `think.turns.TurnStream` is the implementation."""

    turn_id: str
    """The turn's id as clients name it (a submission id as it was given)."""
    stored_id: str
    """The id stored for it, which the service's own calls take."""
    accepted: bool
    """False when an idempotency key or submission id named a turn already admitted."""

    def __aiter__(self) -> AsyncIterator[UIMessageChunk]: ...

    async def result(self, wait_timeout: float | None = None) -> TurnResult: ...


class TurnConversation(Protocol):
    """The conversation the agent's turn API acts on: what `agent` asks of `turns`.
    `think.turns.ConversationHandle` is the implementation (`think.current_conversation()`
    answers it, with the rest of its methods)."""

    async def admit_turn(
        self,
        input: TurnInput | MessagesFunction | None = None,
        *,
        mode: Literal["wait", "submit", "stream"] = "wait",
        **options: Unpack[TurnOptions],
    ) -> TurnResult | Submission | StreamedTurn: ...

    async def chat(
        self, input: TurnInput | MessagesFunction, callback: Any, **options: Unpack[ChatOptions]
    ) -> TurnResult: ...

    async def messages(self) -> list[UIMessage]: ...

    async def add_messages(
        self,
        messages: TurnInput,
        *,
        parent_id: str | None = None,
        mode: Literal["append", "upsert"] = "append",
    ) -> list[str]: ...

    async def cancel_chat(self, turn_id: str, reason: str = "cancelled") -> bool: ...

    async def abort_all_requests(self, reason: str = "cancelled") -> list[str]: ...

    async def get_submission(self, turn_id: str) -> Submission | None: ...

    async def configure(self, config: dict[str, Any]) -> None: ...

    async def rebuild_system_prompt(self) -> None: ...

    async def reconcile_scheduled_tasks(self) -> int: ...

    async def add_mcp_server(self, server: McpServer) -> None: ...

    async def remove_mcp_server(self, name: str) -> bool: ...

    def sub_agent(self, agent: type[Think], name: str) -> TurnConversation: ...

    async def run_agent_tool(
        self,
        agent: type[Think],
        input: str,
        *,
        name: str | None = None,
        **options: Unpack[AgentToolRunOptions],
    ) -> AgentToolResult: ...


class TurnAPI:
    """What runs a conversation's turns: `run_turn` and the shortcuts that are `run_turn` in
    one mode, on the conversation `conversation()` answers."""

    async def conversation(self) -> TurnConversation:
        """The conversation this runs turns on."""
        raise NotImplementedError

    @overload
    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = ...,
        *,
        mode: Literal["wait"] = ...,
        **options: Unpack[TurnOptions],
    ) -> TurnResult: ...

    @overload
    async def run_turn(
        self,
        input: TurnInput | None = ...,
        *,
        mode: Literal["submit"],
        **options: Unpack[TurnOptions],
    ) -> Submission: ...

    @overload
    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = ...,
        *,
        mode: Literal["stream"],
        **options: Unpack[TurnOptions],
    ) -> StreamedTurn: ...

    async def run_turn(
        self,
        input: TurnInput | MessagesFunction | None = None,
        *,
        mode: Literal["wait", "submit", "stream"] = "wait",
        **options: Unpack[TurnOptions],
    ) -> TurnResult | Submission | StreamedTurn:
        """Admit a turn: `wait` for its result, `submit` for durable acceptance, or `stream`
        its chunks. Give exactly one of `input` and `continuation=True`.

        `idempotency_key` and/or `submission_id` (the turn id you choose) make a retry safe:
        a known one answers the existing record (`accepted=False`), and a key and an id that
        name different submissions raise `SubmissionConflict`. `concurrency` overrides the
        agent's `message_concurrency` for this submission ("drop" to a busy conversation
        raises `ConversationBusy`). `wait_timeout` bounds a wait (None: no limit).
        """
        conversation = await self.conversation()
        return await conversation.admit_turn(input, mode=mode, **options)

    async def save_messages(
        self, messages: TurnInput | MessagesFunction, **options: Unpack[SaveOptions]
    ) -> TurnResult:
        """Add messages and run a turn on them, waiting for its result (`run_turn` wait)."""
        return await self.run_turn(messages, **options)

    async def submit_messages(
        self, messages: TurnInput, **options: Unpack[SubmitOptions]
    ) -> Submission:
        """Durably accept a turn and return at once (`run_turn` submit); safe from a tool."""
        return await self.run_turn(messages, mode="submit", **options)

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
