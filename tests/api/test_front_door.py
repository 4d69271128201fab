"""One front door: a submission over HTTP and one from Python (`ThinkService`) go through
the same admission with the same idempotency fingerprint, so the same Idempotency-Key with
the same request is the same turn whichever door comes first, the same key with another
request is a conflict at both doors (409 over HTTP, `IdempotencyConflict` in Python), and both
doors show that turn through the same view."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._turn_helpers import helper_path
from think import Submission, ThinkService
from think.storage import IdempotencyConflict

# One request in each form the input may take, as HTTP's body carries it; Python passes the
# same input and options to `run_turn`. A message carries its id: without one, each call would
# make a new message and no retry could repeat it.
REQUESTS: dict[str, dict[str, Any]] = {
    "text": {"input": "same turn"},
    "a message, with body and client tools": {
        "input": {"id": "msg_door_1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        "body": {"locale": "fr"},
        "client_tools": [{"name": "pick_color", "description": "Ask the user"}],
    },
    "messages, with concurrency and a submission id": {
        "input": [{"id": "msg_door_2", "role": "user", "parts": [{"type": "text", "text": "a"}]}],
        "concurrency": "queue",
        "submission_id": "turn_door_{cid}",
    },
}


def _for(form: str, cid: str) -> dict[str, Any]:
    """The request with this test's conversation id where it names one (a submission id)."""
    request = REQUESTS[form]
    return {k: v.format(cid=cid) if k == "submission_id" else v for k, v in request.items()}


async def _over_http(
    api: httpx.AsyncClient, cid: str, body: dict[str, Any], key: str
) -> httpx.Response:
    return await api.post(f"{helper_path(cid)}/turns", json=body, headers={"Idempotency-Key": key})


async def _from_python(
    service: ThinkService, cid: str, body: dict[str, Any], key: str
) -> Submission:
    """The same request from Python, in submit mode (HTTP's default)."""
    options = {k: v for k, v in body.items() if k != "input"}
    return await service.conversation("helper", cid).run_turn(
        body["input"], mode="submit", idempotency_key=key, **options
    )


@pytest.mark.parametrize("form", sorted(REQUESTS))
async def test_the_same_key_is_the_same_turn_http_first(
    api: httpx.AsyncClient, service: ThinkService, cid: str, form: str
) -> None:
    body = _for(form, cid)
    first = await _over_http(api, cid, body, "door-key")
    assert first.status_code == 202, first.text
    assert first.json()["accepted"] is True

    again = await _from_python(service, cid, body, "door-key")
    assert again.accepted is False
    assert again.turn_id == first.json()["turn_id"]
    assert again.idempotency_key == "door-key"


@pytest.mark.parametrize("form", sorted(REQUESTS))
async def test_the_same_key_is_the_same_turn_python_first(
    api: httpx.AsyncClient, service: ThinkService, cid: str, form: str
) -> None:
    body = _for(form, cid)
    first = await _from_python(service, cid, body, "door-key")
    assert first.accepted is True

    again = await _over_http(api, cid, body, "door-key")
    assert again.status_code == 200, again.text
    assert again.json()["accepted"] is False
    assert again.json()["turn_id"] == first.turn_id


async def test_another_request_with_the_key_conflicts_http_first(
    api: httpx.AsyncClient, service: ThinkService, cid: str
) -> None:
    first = await _over_http(api, cid, {"input": "the first request"}, "clash")
    assert first.status_code == 202
    with pytest.raises(IdempotencyConflict, match=first.json()["turn_id"]):
        await service.conversation("helper", cid).submit_messages(
            "another request", idempotency_key="clash"
        )
    # The mode is not part of the request: waiting for the first one is no conflict.
    waited = await service.conversation("helper", cid).run_turn(
        "the first request", idempotency_key="clash"
    )
    assert waited.turn_id == first.json()["turn_id"] and waited.accepted is False


async def test_another_request_with_the_key_conflicts_python_first(
    api: httpx.AsyncClient, service: ThinkService, cid: str
) -> None:
    conversation = service.conversation("helper", cid)
    first = await conversation.submit_messages("the first request", idempotency_key="clash")
    clash = await _over_http(api, cid, {"input": "another request"}, "clash")
    assert clash.status_code == 409
    assert clash.headers["content-type"] == "application/problem+json"
    assert clash.json()["turn_id"] == first.turn_id
    # Another body field than the input is another request too.
    other_body = await _over_http(
        api, cid, {"input": "the first request", "body": {"x": 1}}, "clash"
    )
    assert other_body.status_code == 409


async def test_both_doors_show_a_turn_alike(
    api: httpx.AsyncClient, service: ThinkService, cid: str
) -> None:
    """HTTP's `Turn` and Python's `Submission` and `TurnResult` are one view of the turn."""
    conversation = service.conversation("helper", cid)
    result = await conversation.run_turn("show me", idempotency_key="view")
    over_http = (await api.get(f"{helper_path(cid)}/turns/{result.turn_id}")).json()
    submission = await conversation.get_submission(result.turn_id)
    assert submission is not None
    for name, value in submission.model_dump(mode="json").items():
        assert over_http[name] == value, name
    assert over_http["status"] == result.status == "completed"
    assert result.message is not None
    assert over_http["message"]["id"] == result.message.id == over_http["message_id"]
    assert over_http["message"]["parts"] == result.message.parts
    assert over_http["output"] == result.output and over_http["error"] == result.error


# Request hashes of keys stored before the doors shared one fingerprint, as the gateway's own
# code computed them then: a retry of such a key must still find its turn.
PINNED_HASHES = {
    "82ce5a5387c3f561058ff7c046329c831ab4a449b56169ffe9b686051ab7d014": {"input": "pinned"},
    "5f9cdf117288441799800d0001bbfc586a7ca01d32f7a7fdf8c4cb6a7ce8cf8c": {
        "input": [{"id": "msg_pinned", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "body": {"a": 1},
        "client_tools": [{"name": "pick"}],
        "concurrency": "queue",
    },
}


@pytest.mark.parametrize("door", ["http", "python"])
@pytest.mark.parametrize("pinned", sorted(PINNED_HASHES))
async def test_a_stored_key_keeps_its_request_hash(
    api: httpx.AsyncClient,
    service: ThinkService,
    engine: AsyncEngine,
    cid: str,
    door: str,
    pinned: str,
) -> None:
    body = PINNED_HASHES[pinned]
    if door == "http":
        turn_id = (await _over_http(api, cid, body, "pinned")).json()["turn_id"]
    else:
        turn_id = (await _from_python(service, cid, body, "pinned")).turn_id
    async with engine.connect() as conn:
        stored = await conn.scalar(
            sql("SELECT request_hash FROM turns WHERE id = :id"), {"id": turn_id}
        )
    assert stored == pinned
