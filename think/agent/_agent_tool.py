"""Sub-agents: a child agent's conversation owned by a parent's, and the agent tool that
delegates a parent model's call to it (`agent_tool`).

A child is a normal conversation of the child agent: same tenant as the parent's, its id
derived from the parent's agent, conversation and the child's name (`child_conversation_id`),
so it is reachable over HTTP like any other (drill-in) and remembers earlier delegations. An
agent tool's call is not run by the tool-call activity: the parent's turn workflow admits the
child's turn (idempotency key: the parent turn and tool call) and waits for it without an
activity, while the child's steps show their progress in the parent's stream
(`think.engine.activities._agent_tool`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, ValidationError

from think._messages import ID
from think._protocol import joined_text, last_step_text, parts_of
from think.agent._turn_api import AddOptions, ChatOptions, TurnAPI, TurnConversation
from think.agent._turn_hooks import StoredTurnConfig
from think.agent._turn_input import MessagesFunction, TurnInput
from think.agent._turn_results import Submission, TurnResult
from think.exceptions import ToolError, UserError
from think.tools import ApprovalPolicy, Tool

if TYPE_CHECKING:
    from think.agent._think import Think


def check_child_name(name: str) -> None:
    if not isinstance(name, str) or not ID.fullmatch(name):
        raise UserError(
            f"sub-agent name {name!r} is not a valid id: use 1 to 128 letters, digits, "
            "'.', '_', ':', '@' or '-', starting with a letter or digit"
        )


def child_conversation_id(parent_agent: str, parent_conversation_id: str, name: str) -> str:
    """The id of the child conversation `name` of a parent conversation: readable when it
    fits (`lead.c1.research`), else a stable hash of the same three parts."""
    check_child_name(name)
    candidate = f"{parent_agent}.{parent_conversation_id}.{name}"
    if ID.fullmatch(candidate):
        return candidate
    digest = hashlib.sha256(f"{parent_agent}\0{parent_conversation_id}\0{name}".encode())
    return f"sub.{digest.hexdigest()[:48]}"


class AgentToolResult(BaseModel):
    """A delegation's outcome: what an agent tool's call records as its result (and the
    parent's model reads), and what `run_agent_tool` answers."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    agent: str
    conversation_id: str
    turn_id: str
    status: str
    text: str
    """The child's final answer: the text of its turn's last step."""
    structured: Any = None
    """The child's validated structured output, when its turn had an output type
    (`TurnConfig.output`, from the child's `before_turn`): in the tool's result, its JSON;
    from `run_agent_tool`, an instance of the child's pydantic class (the JSON for a JSON
    Schema). None, and absent from the result, otherwise."""
    error: str | None = None
    """Why the child's turn did not complete (not part of the tool's result: a failed
    delegation is a tool error there)."""

    def output(self) -> dict[str, Any]:
        """The tool result's JSON: `agent`, `conversation_id`, `turn_id`, `status`, `text`,
        and `structured` when the child gave a structured output."""
        unset = {"structured"} if self.structured is None else set()
        return self.model_dump(mode="json", exclude={"error", *unset})


def delegation_failure(
    agent: str, status: str, error: str | None, turn_id: str, conversation_id: str
) -> str | None:
    """The tool error a child turn that ended `status` makes of its delegation, or None for
    one that answered: a child that failed, was cancelled, ran out of recovery, or was skipped
    before it ran (its conversation cleared, say) has no answer, and the parent's model must
    not read an empty success as one. A skip merged into a later turn (`answered_by`) is
    answered by that turn and is not passed here."""
    what = {
        "error": "failed",
        "aborted": "was cancelled",
        "interrupted": "was interrupted",
        "skipped": "was skipped before it could answer",
    }.get(status)
    if what is None:
        return None
    why = error or ("its turn never ran" if status == "skipped" else status)
    return f"agent {agent!r} {what}: {why} (turn {turn_id} in conversation {conversation_id})"


def typed_output(config: dict[str, Any] | None, output: Any) -> Any:
    """A child turn's stored structured output as Python wants it: an instance of the
    pydantic class its turn named (`TurnConfig.output`, kept by import path), else the JSON
    as stored (a JSON Schema's output, or a class this process cannot import, or that has
    changed since and no longer accepts it: the answer is still worth having)."""
    if output is None:
        return None
    stored = StoredTurnConfig.read(config).output
    if stored is None or stored.class_path is None:
        return output
    try:
        target = stored.resolve()
        return target.model_validate(output) if isinstance(target, type) else output
    except (UserError, ImportError, ValidationError):
        return output


def answer_text(message: Mapping[str, Any] | None) -> str:
    """The text of a message's last step: a turn's final answer (earlier steps' text came
    before tool calls)."""
    parts = parts_of(message)
    return last_step_text(parts) or joined_text(parts)


class AgentTool(Tool):
    """A tool whose call is a turn of another agent (`agent_tool`). The parent's model calls it
    with `{"input": "..."}`; its result is the child turn as an object: `agent`,
    `conversation_id`, `turn_id`, `status`, `text` (the child's final answer) and, when the
    child's turn had an output type, `structured`. `needs_approval` (True, or a policy as for
    any tool) pauses the parent's turn for a person before the child is started."""

    def __init__(
        self,
        agent: type[Think],
        *,
        name: str | None = None,
        description: str | None = None,
        fresh: bool = False,
        timeout: float = 3600.0,
        needs_approval: bool | ApprovalPolicy = False,
        approval_timeout: float | None = None,
    ) -> None:
        tool_name = name or agent.name

        def delegate(input: str) -> Any:
            """Delegate a task to another agent.

            Args:
                input: The task, in full: the other agent sees only this.
            """
            raise ToolError(
                f"agent tool {tool_name!r} runs as a turn of agent {agent.name!r}, started by "
                "the turn's workflow; it cannot be called as a plain function"
            )

        delegate.__name__ = tool_name
        super().__init__(
            delegate,
            name=tool_name,
            description=description
            or agent.description
            or f"Delegate a task to the {agent.name} agent; it answers with its findings.",
            timeout=timeout,
            needs_approval=needs_approval,
            approval_timeout=approval_timeout,
        )
        self.agent = agent
        self.fresh = fresh

    def child_name(self, tool_call_id: str) -> str:
        """The child's name under the parent conversation: one child per tool, or one per
        call with `fresh=True`."""
        return f"{self.name}.{tool_call_id}" if self.fresh else self.name

    def __repr__(self) -> str:
        return f"AgentTool({self.name!r} -> {self.agent.name!r})"


class AgentToolOptions(TypedDict, total=False):
    """`agent_tool`'s keyword options, each optional (`AgentTool` says their defaults)."""

    name: str | None
    description: str | None
    fresh: bool
    timeout: float
    needs_approval: bool | ApprovalPolicy
    approval_timeout: float | None


def agent_tool(agent: type[Think], **options: Unpack[AgentToolOptions]) -> AgentTool:
    """A tool that delegates to a sub-agent: each call is a turn of `agent` in a child
    conversation of the calling one (by default one per parent conversation and tool, which
    remembers earlier delegations; `fresh=True` gives each call a child of its own). `timeout`
    bounds how long the parent waits for the child's turn (seconds), after which the child is
    cancelled and the parent's model gets a tool error. `needs_approval` asks a person before
    each call starts a child (`approval_timeout`: denied when nobody decides in time), as for
    any tool."""
    return AgentTool(agent, **options)


def agent_tools(tools: Sequence[Tool]) -> list[AgentTool]:
    return [t for t in tools if isinstance(t, AgentTool)]


class SubAgent(TurnAPI):
    """A handle on a child agent's conversation, from an agent's hooks and tools:
    `self.sub_agent(Researcher, "child-1")`. The same methods as `ConversationHandle` (the
    Python turn API) on the child's conversation, which is found on first use (the parent's is
    the conversation of the turn being served)."""

    def __init__(
        self,
        agent: type[Think],
        name: str,
        parent: Callable[[], Awaitable[TurnConversation]],
    ) -> None:
        check_child_name(name)
        self.agent = agent
        self.name = name
        self._parent = parent
        self._handle: TurnConversation | None = None

    def __repr__(self) -> str:
        return f"<SubAgent {self.agent.name} {self.name!r}>"

    async def conversation(self) -> TurnConversation:
        """The child's conversation (what HTTP reaches at /v1/agents/{child}/conversations/…)."""
        if self._handle is None:
            parent = await self._parent()
            self._handle = parent.sub_agent(self.agent, self.name)
        return self._handle

    async def chat(
        self, input: TurnInput | MessagesFunction, callback: Any, **options: Unpack[ChatOptions]
    ) -> TurnResult:
        return await (await self.conversation()).chat(input, callback, **options)

    async def add_messages(self, messages: TurnInput, **options: Unpack[AddOptions]) -> list[str]:
        return await (await self.conversation()).add_messages(messages, **options)

    async def cancel_chat(self, request_id: str, reason: str = "cancelled") -> bool:
        return await (await self.conversation()).cancel_chat(request_id, reason)

    async def abort_all_requests(self, reason: str = "cancelled") -> list[str]:
        return await (await self.conversation()).abort_all_requests(reason)

    async def get_submission(self, turn_id: str) -> Submission | None:
        return await (await self.conversation()).get_submission(turn_id)

    async def messages(self) -> list[Any]:
        return list(await (await self.conversation()).messages())
