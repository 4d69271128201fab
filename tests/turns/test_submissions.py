"""Submission records over HTTP: empty submissions refused before anything is stored,
`submission_id` / Idempotency-Key conflicts, retries of a still-pending submission, and
deleting ended turns singly and in bulk (never an active one, never their messages)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._turn_helpers import helper_path, slow, stored_rows, streaming
from think import ThinkService, UIMessage, UserError
from think.storage import TurnStillActive
from think.testing import FakeOpenAIServer, text


async def test_an_empty_submission_stores_nothing(
    api: httpx.AsyncClient, service: ThinkService, cid: str
) -> None:
    for body in ({"input": ""}, {"input": "   "}, {"input": []}):
        answer = await api.post(f"{helper_path(cid)}/turns", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["field"] == "input"
    assert (await api.get(helper_path(cid))).status_code == 404  # not even the conversation
    conv = service.conversation("helper", cid)
    for empty in ("", []):
        with pytest.raises(UserError, match="input must"):
            await conv.submit_messages(empty)
    assert (await api.get(helper_path(cid))).status_code == 404


async def test_submission_id_and_idempotency_key_must_agree(
    api: httpx.AsyncClient, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    sid = f"{cid}-first"
    first = await api.post(
        url, json={"input": "hi", "submission_id": sid}, headers={"Idempotency-Key": "k1"}
    )
    assert first.status_code == 202 and first.json()["turn_id"] == sid
    repeat = await api.post(
        url, json={"input": "hi", "submission_id": sid}, headers={"Idempotency-Key": "k1"}
    )
    assert repeat.status_code == 200
    assert repeat.json()["turn_id"] == sid and repeat.json()["accepted"] is False
    other_key = await api.post(
        url, json={"input": "hi", "submission_id": sid}, headers={"Idempotency-Key": "k2"}
    )
    assert other_key.status_code == 409 and other_key.json()["turn_id"] == sid
    other_id = await api.post(
        url,
        json={"input": "hi", "submission_id": f"{cid}-other"},
        headers={"Idempotency-Key": "k1"},
    )
    assert other_id.status_code == 409 and other_id.json()["turn_id"] == sid
    # A submission id alone is a key of its own: a repeat answers the same turn.
    alone = {"input": "again", "submission_id": f"{cid}-alone"}
    assert (await api.post(url, json=alone)).status_code == 202
    again = await api.post(url, json=alone)
    assert again.status_code == 200 and again.json()["accepted"] is False
    changed = await api.post(url, json={**alone, "input": "something else"})
    assert changed.status_code == 409
    # Within its tenant the id names one turn: another conversation cannot take it.
    elsewhere = await api.post(f"{helper_path(cid)}-b/turns", json=alone)
    assert elsewhere.status_code == 409
    bad = await api.post(url, json={"input": "x", "submission_id": "has space"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "submission_id"


async def test_a_retry_of_a_pending_submission_returns_it(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, slow())
    url = f"{helper_path(cid)}/turns"
    first = (await api.post(url, json={"input": "a"})).json()
    await streaming(api, "helper", cid, first["turn_id"])
    queued = await api.post(url, json={"input": "b"}, headers={"Idempotency-Key": "b-1"})
    assert queued.status_code == 202 and queued.json()["status"] == "pending"
    retry = await api.post(url, json={"input": "b"}, headers={"Idempotency-Key": "b-1"})
    assert retry.status_code == 200
    assert retry.json()["turn_id"] == queued.json()["turn_id"]
    assert retry.json()["status"] == "pending" and retry.json()["accepted"] is False
    done = await api.post(
        url, json={"input": "b", "mode": "wait"}, headers={"Idempotency-Key": "b-1"}
    )
    assert done.json()["status"] == "completed"


async def test_deleting_turns(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    done = [
        (
            await api.post(
                url, json={"input": f"q{i}", "mode": "wait"}, headers={"Idempotency-Key": f"q{i}"}
            )
        ).json()
        for i in range(3)
    ]
    assert {t["status"] for t in done} == {"completed"}
    cutoff = datetime.now(UTC)
    fake_model.script(cid, slow())
    running = (await api.post(url, json={"input": "long"})).json()
    await streaming(api, "helper", cid, running["turn_id"])

    # One ended turn: its record and stream go, its messages stay.
    gone = await api.delete(f"{url}/{done[0]['turn_id']}")
    assert gone.status_code == 204
    assert (await api.get(f"{url}/{done[0]['turn_id']}")).status_code == 404
    async with engine.connect() as conn:
        left = await conn.scalar(
            sql("SELECT count(*) FROM stream_chunks WHERE turn_id = :t"), {"t": done[0]["turn_id"]}
        )
    assert left == 0
    texts = [
        m["parts"][-1]["text"]
        for m in (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    ]
    assert texts[:2] == ["q0", "echo: q0"]
    assert (await api.delete(f"{url}/{done[0]['turn_id']}")).status_code == 404
    # The key is free again once its record is gone.
    reused = await api.post(url, json={"input": "q0 again"}, headers={"Idempotency-Key": "q0"})
    assert reused.status_code == 202

    # An active turn is never deleted.
    busy = await api.delete(f"{url}/{running['turn_id']}")
    assert busy.status_code == 409 and busy.json()["turn_id"] == running["turn_id"]
    refused = await api.delete(url, params={"status": "running"})
    # The query's first `status` is the one refused: only ended statuses may be deleted.
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "status.0"

    # In bulk: ended turns of a status, submitted before a time.
    bulk = await api.delete(url, params={"status": "completed", "before": cutoff.isoformat()})
    assert bulk.status_code == 200
    assert sorted(bulk.json()["deleted"]) == sorted(t["turn_id"] for t in done[1:])
    remaining = {t["turn_id"] for t in (await api.get(url)).json()["turns"]}
    assert running["turn_id"] in remaining and reused.json()["turn_id"] in remaining
    everything = await api.delete(url)  # all ended ones; the running turn stays
    assert running["turn_id"] not in everything.json()["deleted"]
    assert (await api.get(f"{url}/{running['turn_id']}")).status_code == 200
    unknown = await api.delete(f"{helper_path(cid)}-none/turns")
    assert unknown.status_code == 404


async def test_submission_records_from_python(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    first = await conv.save_messages("one")
    second = await conv.save_messages("two")
    listed = await conv.list_submissions()
    assert [s.turn_id for s in listed] == [second.turn_id, first.turn_id]
    assert [s.turn_id for s in await conv.list_submissions(limit=1)] == [second.turn_id]
    assert await conv.list_submissions(status=["error"]) == []
    fake_model.script(cid, slow())
    running = await conv.submit_messages("three")
    with pytest.raises(TurnStillActive):
        await conv.delete_submission(running.turn_id)
    await conv.delete_submission(first.turn_id)
    assert await conv.get_submission(first.turn_id) is None
    assert await conv.delete_submissions(status=["completed"]) == [second.turn_id]
    assert await conv.cancel_chat(running.turn_id, "enough")
    assert (await conv.result(running.turn_id)).status == "aborted"
    assert await conv.delete_submissions() == [running.turn_id]
    assert len(await conv.messages()) >= 4  # the messages stay


async def test_only_an_id_the_caller_chose_can_be_taken(
    api: httpx.AsyncClient, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Admission looks up the message ids a submission names: one the conversation holds
    already is a 409 naming it, with nothing stored. Ids minted for a string or an id-less
    message are 64 random bits, never looked up (one statement fewer per submission)."""
    fake_model.script(cid, text("one"), text("two"), text("three"))
    chosen = {"id": "chosen-1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    first = await api.post(f"{helper_path(cid)}/turns", json={"input": [chosen], "mode": "wait"})
    assert first.status_code == 200 and first.json()["status"] == "completed", first.text
    again = await api.post(
        f"{helper_path(cid)}/turns",
        json={"input": [{**chosen, "parts": [{"type": "text", "text": "other"}]}]},
    )
    assert again.status_code == 409, again.text
    assert "'chosen-1'" in again.json()["detail"]
    for given in ("a string", [{"role": "user", "parts": [{"type": "text", "text": "no id"}]}]):
        answer = await api.post(f"{helper_path(cid)}/turns", json={"input": given, "mode": "wait"})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql(
                    "SELECT m.id, m.role FROM messages m JOIN conversations c "
                    "ON c.uid = m.conversation_uid WHERE c.id = :cid ORDER BY m.created_at"
                ),
                {"cid": cid},
            )
        ).all()
    assert (await stored_rows(engine, cid)).turns == 3  # the refused submission stored none
    assert [r.role for r in rows] == ["user", "assistant"] * 3
    assert rows[0].id == "chosen-1" and len({r.id for r in rows}) == 6


def test_a_minted_id_is_told_from_a_chosen_one() -> None:
    assert not UIMessage.user_text("hi").chose_id
    assert UIMessage.user_text("hi", id="m1").chose_id
    parts = [{"type": "text", "text": "hi"}]
    assert not UIMessage.model_validate({"role": "user", "parts": parts}).chose_id
    assert UIMessage.model_validate({"id": "m1", "role": "user", "parts": parts}).chose_id
    assert UIMessage.user_text("hi").model_copy(update={"id": "m2"}).chose_id
