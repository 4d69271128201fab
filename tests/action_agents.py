"""Agents with actions (tests/actions/): refunds paid through a fake payments API that honours
idempotency keys (`tests.actions._payments`), its address and the grants in the conversation's
configuration."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from think import ActionContext, Think, action, attach_reply
from think.tools import ActionRunContext


async def _pay(ctx: ActionRunContext, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{ctx.config['payments_url']}{path}",
            json=body,
            headers={"Idempotency-Key": ctx.idempotency_key},
        )
    response.raise_for_status()
    paid: dict[str, Any] = response.json()
    return paid


@action(key=lambda order_id: f"refund:{order_id}", permission="refunds", heartbeat_timeout=2)
async def refund(order_id: str, amount: float, ctx: ActionRunContext) -> dict[str, Any]:
    """Refund an order.

    Args:
        order_id: The order to refund.
        amount: How much, in euros.
    """
    paid = await _pay(ctx, "/refunds", {"order_id": order_id, "amount": amount})
    if ctx.config.get("hang_after_effect") and not paid["replayed"]:
        await asyncio.sleep(3600)  # the test kills the worker here
    if order_id == "bad":
        raise RuntimeError("the payments API refused order 'bad'")
    attach_reply(f"refund {paid['refund_id']}\n", media_type="text/plain", filename="receipt.txt")
    return {"refund_id": paid["refund_id"], "order_id": order_id, "amount": amount}


@action(
    key=lambda order_id: f"cancel:{order_id}",
    needs_approval=True,
    approval="durable_pause",
    approval_timeout=600,
)
async def cancel_order(order_id: str, ctx: ActionRunContext) -> dict[str, Any]:
    """Cancel an order; a person must approve it, which may take days.

    Args:
        order_id: The order to cancel.
    """
    return await _pay(ctx, "/cancellations", {"order_id": order_id})


@action(key=lambda order_id: f"wire:{order_id}", needs_approval=True, permission="wires")
async def wire(order_id: str, amount: float, ctx: ActionRunContext) -> dict[str, Any]:
    """Wire money for an order; a person approves it in the turn.

    Args:
        order_id: The order.
        amount: How much.
    """
    return await _pay(ctx, "/wires", {"order_id": order_id, "amount": amount})


@action(key=lambda n: f"big:{n}", max_output_chars=200)
def big_report(n: int) -> dict[str, Any]:
    """A large result.

    Args:
        n: How many rows.
    """
    return {"rows": [{"i": i, "text": "x" * 20} for i in range(n)]}


@action(key=lambda n: f"slow:{n}", timeout=1)
async def slow_charge(n: int) -> str:
    """A charge whose processor never answers.

    Args:
        n: Which.
    """
    await asyncio.sleep(30)
    return "charged"


class Refunder(Think):
    """Refunds, cancellations and wires through the payments API; grants in the conversation's
    configuration (`grants`: a list of permissions)."""

    name = "refunder"

    def get_model(self) -> str:
        return "scripted-model"

    def get_actions(self) -> list[Any]:
        return [refund, cancel_order, wire, big_report, slow_charge]

    def authorize_action(self, ctx: ActionContext) -> bool | str:
        if ctx.permission is None:
            return True
        if ctx.permission in ctx.config.get("grants", []):
            return True
        return f"{ctx.permission!r} is not granted in this conversation"


class FollowingUp(Refunder):
    """As Refunder, with a parked cancellation whose outcome starts a turn at once."""

    name = "following-up"

    def get_actions(self) -> list[Any]:
        follow = action(
            key=lambda order_id: f"cancel:{order_id}",
            needs_approval=True,
            approval="durable_pause",
            follow_up=True,
            approval_timeout=3,
            name="cancel_order",
        )(cancel_order.fn)
        return [follow]


class GuardedRefunder(Refunder):
    """As Refunder, whose approvals only the `ops-lead` key may decide."""

    name = "guarded-refunder"
    approvers = frozenset({"ops-lead"})
