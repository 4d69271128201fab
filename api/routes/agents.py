from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter

from api.deps import Res
from api.schemas import AgentOut, AgentsOut, AgentTool
from think.exceptions import ConfigurationError
from think.server import Settings, Think, Tool, resolve_model

log = logging.getLogger("think.api.agents")

router = APIRouter(tags=["agents"])

MCP_WAIT_SECONDS = 5.0
"""The longest the listing waits for an MCP server (all at once); a slower one is listed
with the tools it had when last reached, or none, while it connects for the next listing."""


@router.get("/v1/agents", response_model=AgentsOut)
async def list_agents(res: Res) -> AgentsOut:
    agents = await asyncio.gather(*(_describe(cls, res.settings) for cls in res.registry))
    return AgentsOut(agents=list(agents))


async def _describe(cls: type[Think], settings: Settings) -> AgentOut:
    """One agent as listed. Its `get_model`, `get_tools` and `get_mcp_servers` run here,
    outside any conversation: one that raises leaves its model empty or its tools out (and
    says so in the log) rather than failing the whole listing. MCP servers are asked for
    their tools (each for at most `MCP_WAIT_SECONDS`; the agents concurrently)."""
    description = cls.description or (cls.__doc__ or "").strip().split("\n")[0]
    model = served_by = ""
    tools: list[AgentTool] = []
    try:
        agent = cls()
        found = agent.get_model()
        # A fallback chain is listed as its models in order, comma-separated.
        model = ", ".join(
            m if isinstance(m, str) else m.name
            for m in (found if isinstance(found, list) else [found])
        )
        # "gpt-4o-mini" alone misleads when no endpoint is configured: the offline model
        # answers then. Resolving builds no connection (clients are pooled, made on first use).
        try:
            served_by = resolve_model(found, settings).name
        except ConfigurationError as error:
            served_by = f"nobody: {error}"
        tools = [_tool(t) for t in agent.get_tools()]
    except Exception:
        log.warning("agent %s could not describe its model or tools", cls.name, exc_info=True)
    else:
        try:
            if agent.include_mcp_tools:
                tools.extend(_tool(t) for t in await agent.mcp_tools(within=MCP_WAIT_SECONDS))
        except Exception:
            log.warning("agent %s could not list its MCP servers", cls.name, exc_info=True)
    return AgentOut(
        name=cls.name, description=description, model=model, served_by=served_by, tools=tools
    )


def _tool(tool: Tool) -> AgentTool:
    return AgentTool(
        name=tool.name, description=tool.description, needs_approval=tool.may_need_approval
    )
