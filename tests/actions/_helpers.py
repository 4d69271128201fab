"""What the actions tests share: a conversation configured to pay through the fake payments
API (the `payments` fixture, tests/actions/conftest.py), the audit trail, and the two ways an
action waits for a person."""

from __future__ import annotations

from typing import Any

import httpx

from tests._turn_helpers import tool_part, wait_turn
from tests.action_agents import Refunder
from tests.actions._payments import FakePayments
from think import ThinkService
from think.testing import FakeOpenAIServer, text, tool_call


async def configure(
    service: ThinkService,
    payments: FakePayments,
    cid: str,
    agent: type[Refunder] = Refunder,
    tenant: str = "default",
    **config: Any,
) -> None:
    """The conversation pays through the fake API, with `config` (say `grants`)."""
    conversation = service.conversation(agent, cid, tenant=tenant)
    await conversation.configure({"payments_url": payments.url, **config})


async def audit(api: httpx.AsyncClient, agent: str = "refunder", **query: str) -> list[Any]:
    """The agent's audit trail, filtered by `query` (`key`, `conversation_id`)."""
    response = await api.get(f"/v1/agents/{agent}/actions", params=query)
    assert response.status_code == 200, response.text
    found: list[Any] = response.json()["actions"]
    return found


async def paused_wire(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """A `wire` the model asks for, paused in its turn for approval: the turn, its pending
    approval and the order."""
    order = f"o-{cid}"
    fake_model.script(
        cid, tool_call("wire", {"order_id": order, "amount": 70}, id="call_w"), text("ok")
    )
    paused = await wait_turn(api, "refunder", cid, "wire it", status="awaiting_approval")
    [pending] = paused["pending_approvals"]
    return paused, pending, order


async def parked_cancel(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, agent: str = "refunder"
) -> tuple[dict[str, Any], str]:
    """A `cancel_order` the model asks for, parked outside its ended turn: the turn and the
    approval id."""
    fake_model.script(
        cid, tool_call("cancel_order", {"order_id": f"o-{cid}"}, id="call_c"), text("asked")
    )
    asked = await wait_turn(api, agent, cid, "cancel", status="completed")
    approval_id: str = tool_part(asked, "call_c")["output"]["approval_id"]
    return asked, approval_id
