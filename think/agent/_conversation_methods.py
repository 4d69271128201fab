"""The turn API on the agent itself: `self.run_turn(...)`, `self.submit_messages(...)` and the
rest, for an agent's hooks and tools.

The worker makes a fresh agent instance per activity, and the activity runs with its turn
bound (`think._current.BindTurns`); these methods act on that turn's conversation, exactly as
`await think.current_conversation()` does. Called outside a turn they raise `UserError`: code
that is not serving a turn names its conversation through `ThinkService.conversation(...)`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from think._current import current_conversation
from think.agent._agent_tool import AgentToolResult, SubAgent
from think.agent._turn_api import AddOptions, AgentToolRunOptions, TurnAPI, TurnConversation
from think.agent._turn_input import MessagesFunction, TurnInput
from think.agent._turn_results import TurnResult

if TYPE_CHECKING:
    from think.agent._think import Think
    from think.tools import McpServer


class ConversationMethods(TurnAPI):
    """Mixed into `Think`. Blocking calls (`run_turn` wait or stream, `save_messages`,
    `continue_last_turn`, `chat`) made while the bound turn runs raise `UserError`: they would
    wait for a turn that can only start once this one ends. `submit_messages` (it runs after
    this turn) and `add_messages` (no turn) are what a tool or hook uses then; after the turn
    (`on_chat_response`) everything works."""

    _config: dict[str, Any] | None = None
    """The bound conversation's configuration, loaded by the worker with the agent."""

    def get_config(self) -> dict[str, Any]:
        """The conversation's configuration, as `configure` stored it: `{}` when never
        configured, and outside a conversation (e.g. when `GET /v1/agents` asks `get_model`).
        Works in every hook, tool and `get_model`: the worker loads it with the agent."""
        return copy.deepcopy(self._config) if self._config is not None else {}

    async def configure(self, config: dict[str, Any]) -> None:
        """Replace the conversation's configuration (a JSON object); `get_config` reads it
        at once, and every later activity of the conversation."""
        await (await self.conversation()).configure(config)
        self._config = copy.deepcopy(config)

    async def rebuild_system_prompt(self) -> None:
        """Have the next model step build the frozen system prompt again, from the
        instructions and the context blocks as they are then (see `configure_context`)."""
        await (await self.conversation()).rebuild_system_prompt()

    async def reconcile_scheduled_tasks(self) -> int:
        """Re-arm this conversation's scheduled tasks (conversation scope) after the data
        `get_scheduled_tasks()` reads has changed; returns how many are armed."""
        return await (await self.conversation()).reconcile_scheduled_tasks()

    async def add_mcp_server(self, server: McpServer) -> None:
        """Add an MCP server to this conversation (persisted with it; its tools join the
        agent's from the next turn on). Secrets by environment-variable name only:
        `McpServer.http("crm", url=..., headers_from_env={"authorization": "CRM_AUTH"})`."""
        await (await self.conversation()).add_mcp_server(server)

    async def remove_mcp_server(self, name: str) -> bool:
        """Remove a server `add_mcp_server` added to this conversation."""
        return await (await self.conversation()).remove_mcp_server(name)

    async def conversation(self) -> TurnConversation:
        """The conversation of the turn this agent instance serves."""
        return await current_conversation()

    async def add_messages(
        self, messages: TurnInput, **options: Unpack[AddOptions]
    ) -> Sequence[str]:
        return await (await self.conversation()).add_messages(messages, **options)

    async def chat(self, input: TurnInput | MessagesFunction, callback: Any) -> TurnResult:
        return await (await self.conversation()).chat(input, callback)

    async def cancel_chat(self, turn_id: str, reason: str = "cancelled") -> bool:
        return await (await self.conversation()).cancel_chat(turn_id, reason)

    async def abort_request(self, request_id: str, reason: str = "cancelled") -> bool:
        """Cancel one turn of this conversation (Think's `abortRequest`): `cancel_chat`."""
        return await (await self.conversation()).cancel_chat(request_id, reason)

    async def abort_all_requests(self, reason: str = "cancelled") -> list[str]:
        """Cancel every active turn of this conversation, this one included when called from
        its own hook or tool (Think's `abortAllRequests`); returns the ids cancelled."""
        return await (await self.conversation()).abort_all_requests(reason)

    async def run_agent_tool(
        self,
        agent: type[Think],
        input: str,
        *,
        name: str | None = None,
        **options: Unpack[AgentToolRunOptions],
    ) -> AgentToolResult:
        """Delegate to `agent` from a hook or tool as the agent tool `name` would (Think's
        `runAgentTool`): a turn of that retained child conversation, waited for. From a tool
        this holds the tool's activity while the child runs."""
        conv = await self.conversation()
        return await conv.run_agent_tool(agent, input, name=name, **options)

    def sub_agent(self, agent: type[Think], name: str) -> SubAgent:
        """A handle on the child conversation `name` of agent `agent` under this turn's
        conversation (same tenant, a deterministic id): the turn API on the child, e.g.
        `await self.sub_agent(Researcher, "child-1").chat(task, callback)`. From a tool this
        holds the tool's activity while the child runs; an `agent_tool` does not."""
        return SubAgent(agent, name, self.conversation)


def bind_config(agent: ConversationMethods, config: dict[str, Any]) -> None:
    """Give a worker's fresh agent its conversation's configuration (`get_config`)."""
    agent._config = config
