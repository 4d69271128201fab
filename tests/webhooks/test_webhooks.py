"""Outbound webhooks (issue 34) on a worker and gateway of their own, whose agent `notified`
posts to a receiver on 127.0.0.1 (allowed by THINK_WEBHOOK_PRIVATE_HOSTS): `/flaky` fails
every event twice with 500 before it answers 200, `/reject` answers 400. Retries are
Temporal's (THINK_WEBHOOK_RETRY_SECONDS=0.2 here); a delivery is a workflow of its own, found
by its deterministic id."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tests._replay import replayed
from tests._stack import Stack, own_stack
from tests._turn_helpers import wait_turn
from tests._webhook_receiver import Delivery, Receiver, receiver
from think.testing import FakeOpenAIServer, error, text, tool_call
from think.webhooks import event_id
from think.workflows.inputs import WebhookDeliveryResult
from think.workflows.names import turn_workflow_id, webhook_workflow_id

QUEUE = f"think-webhooks-{secrets.token_hex(3)}"
SECRET = "whsec-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def hooks() -> Iterator[Receiver]:
    routes = {"/flaky": [500, 500, 200], "/reject": [400], "/down": [503] * 4 + [200]}
    with receiver(routes) as found:
        yield found


@pytest.fixture(scope="module")
def hooks_stack(
    stack: Stack, hooks: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": QUEUE,
        "THINK_AGENTS": (
            "tests.agents:Helper,tests.webhook_agents:Notified,tests.webhook_agents:Durable"
        ),
        "THINK_TEST_WEBHOOK_BASE": hooks.base_url,
        "THINK_TEST_WEBHOOK_SECRET": SECRET,
        "THINK_WEBHOOK_PRIVATE_HOSTS": "127.0.0.1",
        "THINK_WEBHOOK_RETRY_SECONDS": "0.2",
    }
    with own_stack(env, tmp_path_factory.mktemp("hooks")) as own:
        yield own


@pytest.fixture
async def api(hooks_stack: Stack) -> Any:
    async with httpx.AsyncClient(base_url=hooks_stack.api_url, timeout=60) as client:
        yield client


def _signed(delivery: Delivery) -> bool:
    expected = hmac.new(SECRET.encode(), delivery.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(delivery.headers["x-think-signature"], f"sha256={expected}")


async def _delivered(temporal: Client, event: str, url: str) -> WebhookDeliveryResult:
    """The outcome of the event's delivery to `url`, once its workflow has started (the turn
    starts it as it ends, a moment after its answer is stored) and ended."""
    handle = temporal.get_workflow_handle(
        webhook_workflow_id(event, url), result_type=WebhookDeliveryResult
    )
    for _ in range(600):
        try:
            return await handle.result()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(0.05)
    raise AssertionError(f"no delivery of {event} to {url} was started")


async def _events(temporal: Client, agent: str, cid: str, turn_id: str) -> int:
    handle = temporal.get_workflow_handle(turn_workflow_id(agent, cid, turn_id))
    await handle.result()
    return len((await handle.fetch_history()).events)


async def test_a_completed_turn_is_delivered_until_the_receiver_takes_it(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    hooks: Receiver,
    cid: str,
) -> None:
    fake_model.script(cid, text("All done."))
    turn = await wait_turn(api, "notified", cid, "hello", status="completed")
    # The turn answered at once: its webhooks are delivered by workflows of their own.
    assert turn["message"]["parts"][-1]["text"] == "All done."
    turn_id = turn["turn_id"]
    event = event_id(turn_id, "turn.completed", [])
    flaky = f"{hooks.base_url}/flaky"
    result = await _delivered(temporal, event, flaky)
    assert (result.status, result.http_status) == ("delivered", 200)

    # Both histories replay against today's code (recorded with THINK_RECORD_HISTORIES=1).
    await replayed(
        temporal.get_workflow_handle(webhook_workflow_id(event, flaky)), "webhook-delivery"
    )
    await replayed(
        temporal.get_workflow_handle(turn_workflow_id("notified", cid, turn_id)), "webhook-turn"
    )
    attempts = hooks.for_turn("/flaky", turn_id)
    assert len(attempts) == 3  # 500, 500, then 200
    assert {a.headers["x-think-event-id"] for a in attempts} == {event}
    assert all(_signed(a) for a in attempts)
    assert [a.json["attempt"] for a in attempts] == [1, 2, 3]
    body = attempts[-1].json
    assert (
        body["type"] == "turn.completed" and attempts[-1].headers["x-think-event"] == body["type"]
    )
    assert body["id"] == event
    assert (body["tenant"], body["agent"], body["conversation_id"]) == ("default", "notified", cid)
    assert (body["turn_id"], body["status"], body["text"]) == (turn_id, "completed", "All done.")
    assert body["error"] is None and body["channel"] == "web"
    assert body["created_at"] and body["ended_at"] and body["sent_at"]
    assert attempts[-1].headers["x-think-timestamp"].isdigit()
    # A forged body fails the check a receiver makes.
    forged = Delivery("/flaky", attempts[-1].headers, attempts[-1].body.replace(b"done", b"gone"))
    assert not _signed(forged)

    # A 4xx other than 408/429 is refused for good: one attempt, not retried.
    rejected = await _delivered(temporal, event, f"{hooks.base_url}/reject")
    assert (rejected.status, rejected.http_status) == ("rejected", 400)
    assert len(hooks.for_turn("/reject", turn_id)) == 1


async def test_an_error_and_a_pause_for_approval_are_events_too(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    hooks: Receiver,
    cid: str,
) -> None:
    fake_model.script(cid, error(401, "bad key"))
    failed = await wait_turn(api, "notified", cid, "hello", status="error")
    event = event_id(failed["turn_id"], "turn.error", [])
    assert (await _delivered(temporal, event, f"{hooks.base_url}/flaky")).status == "delivered"
    [*_, last] = hooks.for_turn("/flaky", failed["turn_id"])
    assert (last.json["type"], last.json["status"]) == ("turn.error", "error")
    assert last.json["error"] and _signed(last)
    # `/reject` subscribed to completions only.
    assert hooks.for_turn("/reject", failed["turn_id"]) == []

    fake_model.script(
        cid,
        text("Deleting.") + tool_call("delete_file", {"path": "/tmp/x"}, id="call_del"),
        text("Deleted."),
    )
    paused = await wait_turn(api, "notified", cid, "delete it", status="awaiting_approval")
    turn_id = paused["turn_id"]
    [pending] = paused["pending_approvals"]
    [delivery] = await hooks.wait_for_turn("/flaky", turn_id, 1)
    body = delivery.json
    assert body["type"] == "turn.paused" and _signed(delivery)
    assert (body["status"], body["text"]) == ("awaiting_approval", "Deleting.")
    assert body["paused"] == [
        {
            "tool_call_id": "call_del",
            "tool_name": "delete_file",
            "kind": "approval",
            "approval_id": pending["approval_id"],
        }
    ]
    decided = await api.post(
        f"{paused['status_url']}/approvals/{pending['approval_id']}", json={"approved": True}
    )
    assert decided.status_code == 200, decided.text
    completed = event_id(turn_id, "turn.completed", [])
    result = await _delivered(temporal, completed, f"{hooks.base_url}/flaky")
    assert result.status == "delivered"
    # Each event was tried three times (the receiver fails each twice), retried separately.
    types = sorted(d.json["type"] for d in hooks.for_turn("/flaky", turn_id))
    assert types == ["turn.completed"] * 3 + ["turn.paused"] * 3
    [*_, done] = hooks.deliveries("/flaky", completed)
    assert done.json["text"] == "Deleted." and _signed(done)


async def test_an_agent_without_webhooks_adds_no_history_event(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """`helper` has no webhooks: its turns' histories are as long as before webhooks existed
    (7 events a plain turn, 9 a tool turn: docs/benchmarks.md). A turn of `notified` adds one
    marker (the local activity that starts its deliveries), within the budget (11)."""
    fake_model.script(cid, text("plain"))
    plain = await wait_turn(api, "helper", cid, "hi", status="completed")
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
    tools = await wait_turn(api, "helper", cid, "add", status="completed")
    assert await _events(temporal, "helper", cid, plain["turn_id"]) == 7
    assert await _events(temporal, "helper", cid, tools["turn_id"]) == 9

    other = f"{cid}-n"
    fake_model.script(other, text("plain"))
    notified = await wait_turn(api, "notified", other, "hi", status="completed")
    fake_model.script(other, tool_call("add", {"a": 1, "b": 2}), text("3"))
    notified_tools = await wait_turn(api, "notified", other, "add", status="completed")
    assert await _events(temporal, "notified", other, notified["turn_id"]) == 8
    assert await _events(temporal, "notified", other, notified_tools["turn_id"]) == 10


def test_the_docs_receiver_verifies_a_signed_body_and_refuses_a_forged_one() -> None:
    """docs/webhooks.md's receiver, run on a body signed as the worker signs it."""
    from datetime import UTC, datetime

    from think.webhooks import signature, signed_body, verify_signature

    doc = (Path(__file__).parents[2] / "docs" / "webhooks.md").read_text()
    snippet = doc.split("## Verifying a signature", 1)[1].split("```python\n", 1)[1]
    scope: dict[str, Any] = {}
    exec(snippet.split("```", 1)[0], scope)
    verify = scope["verify"]

    sent = datetime.now(UTC).isoformat()
    body = signed_body({"type": "turn.completed", "id": "e1"}, sent_at=sent, attempt=1)
    assert json.loads(body) == {"type": "turn.completed", "id": "e1", "sent_at": sent, "attempt": 1}
    header = signature(body, "s3cret")
    assert verify_signature(body, "s3cret", header)
    assert verify(body, header, "s3cret")["id"] == "e1"
    with pytest.raises(ValueError, match="bad signature"):
        verify(body.replace(b"e1", b"e2"), header, "s3cret")
    with pytest.raises(ValueError, match="bad signature"):
        verify(body, header, "another secret")
    old = signed_body({"id": "e1"}, sent_at="2020-01-01T00:00:00+00:00", attempt=1)
    with pytest.raises(ValueError, match="too old"):
        verify(old, signature(old, "s3cret"), "s3cret")


async def test_a_pause_for_a_client_tool_is_an_event(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    hooks: Receiver,
    cid: str,
) -> None:
    fake_model.script(cid, tool_call("get_location", {"precise": True}, id="call_loc"))
    location = {
        "name": "get_location",
        "description": "The user's location, from the browser.",
        "input_schema": {"type": "object", "properties": {"precise": {"type": "boolean"}}},
    }
    turn = await wait_turn(
        api, "notified", cid, "where am I?", status="awaiting_client_tool", client_tools=[location]
    )
    [delivery] = await hooks.wait_for_turn("/flaky", turn["turn_id"], 1)
    assert delivery.json["type"] == "turn.paused" and _signed(delivery)
    assert delivery.json["status"] == "awaiting_client_tool"
    assert delivery.json["paused"] == [
        {
            "tool_call_id": "call_loc",
            "tool_name": "get_location",
            "kind": "client",
            "approval_id": None,
        }
    ]
    cancelled = await api.post(f"{turn['status_url']}/cancel")
    assert cancelled.status_code in (200, 202), cancelled.text
    # An aborted turn raises no event: someone cancelled it, and knows.
    await _events(temporal, "notified", cid, turn["turn_id"])
    paused = delivery.json["id"]
    assert (await _delivered(temporal, paused, f"{hooks.base_url}/flaky")).status == "delivered"
    assert {d.json["type"] for d in hooks.for_turn("/flaky", turn["turn_id"])} == {"turn.paused"}


async def test_a_delivery_outlives_its_worker(
    api: httpx.AsyncClient,
    hooks_stack: Stack,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    hooks: Receiver,
    cid: str,
) -> None:
    """The receiver is down; the worker is SIGKILLed once it has tried; another worker goes
    on retrying the same event (last in this module: it replaces the module's worker)."""
    fake_model.script(cid, text("Noted."))
    turn = await wait_turn(api, "durable", cid, "remember this", status="completed")
    await hooks.wait_for_turn("/down", turn["turn_id"], 1)
    hooks_stack.wait_polling(hooks_stack.replace_worker())
    event = event_id(turn["turn_id"], "turn.completed", [])
    result = await _delivered(temporal, event, f"{hooks.base_url}/down")
    assert (result.status, result.http_status) == ("delivered", 200)
    attempts = hooks.for_turn("/down", turn["turn_id"])
    assert len(attempts) == 5  # four 503s, across two workers, then 200
    assert {a.headers["x-think-event-id"] for a in attempts} == {event}
    assert all(_signed(a) for a in attempts)
