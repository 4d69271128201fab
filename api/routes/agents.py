from __future__ import annotations

from fastapi import APIRouter

from api.deps import Res
from api.schemas import AgentOut, AgentsOut, AgentTool

router = APIRouter(tags=["agents"])


@router.get("/v1/agents", response_model=AgentsOut)
async def list_agents(res: Res) -> AgentsOut:
    agents = []
    for cls in res.registry:
        agent = cls()
        model = agent.get_model()
        agents.append(
            AgentOut(
                name=cls.name,
                description=cls.description or (cls.__doc__ or "").strip().split("\n")[0],
                model=model if isinstance(model, str) else model.name,
                tools=[
                    AgentTool(
                        name=t.name, description=t.description, needs_approval=t.may_need_approval
                    )
                    for t in agent.get_tools()
                ],
            )
        )
    return AgentsOut(agents=agents)
