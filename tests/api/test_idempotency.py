"""Idempotency keys: one turn per key, however many duplicates arrive, even at once."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._turn_helpers import helper_path, stored_rows
from think.testing import FakeOpenAIServer, stall, text


async def test_same_key_same_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    body = {"input": "once"}
    first = await api.post(f"{helper_path(cid)}/turns", json=body, headers={"Idempotency-Key": "k"})
    again = await api.post(f"{helper_path(cid)}/turns", json=body, headers={"Idempotency-Key": "k"})
    assert first.status_code == 202 and first.json()["accepted"] is True
    assert again.status_code == 200 and again.json()["accepted"] is False
    assert again.json()["turn_id"] == first.json()["turn_id"]
    # A repeat in wait mode is the same turn too, and reports where it stands.
    waited = await api.post(
        f"{helper_path(cid)}/turns",
        json={**body, "mode": "wait"},
        headers={"Idempotency-Key": "k"},
    )
    assert waited.json()["turn_id"] == first.json()["turn_id"]
    assert waited.json()["status"] == "completed"
    assert waited.json()["accepted"] is False
    assert fake_model.calls(cid) == 1


async def test_same_key_different_body_conflicts(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    first = await api.post(url, json={"input": "a"}, headers={"Idempotency-Key": "k2"})
    clash = await api.post(url, json={"input": "b"}, headers={"Idempotency-Key": "k2"})
    assert clash.status_code == 409
    assert clash.headers["content-type"] == "application/problem+json"
    assert clash.json()["turn_id"] == first.json()["turn_id"]
    assert (await stored_rows(engine, cid)).turns == 1


async def test_concurrent_storm_makes_one_turn_and_one_model_call(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    # A slow model keeps the turn running while the duplicates land.
    fake_model.script(cid, stall(0.5) + text("only once"))
    url = f"{helper_path(cid)}/turns"
    responses = await asyncio.gather(
        *(
            api.post(url, json={"input": "storm"}, headers={"Idempotency-Key": "storm"})
            for _ in range(40)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 39 + [202]
    assert len({r.json()["turn_id"] for r in responses}) == 1
    assert sum(r.json()["accepted"] for r in responses) == 1
    turn_id = responses[0].json()["turn_id"]
    done = await api.post(
        url, json={"input": "storm", "mode": "wait"}, headers={"Idempotency-Key": "storm"}
    )
    assert done.json()["status"] == "completed"
    await asyncio.sleep(0.5)  # give a (wrong) second run time to show up
    assert fake_model.calls(cid) == 1
    async with engine.connect() as conn:
        users = await conn.scalar(
            sql(
                "SELECT count(*) FROM messages m JOIN conversations c ON c.uid = "
                "m.conversation_uid WHERE c.id = :cid AND m.role = 'user'"
            ),
            {"cid": cid},
        )
    assert users == 1
    turns = (await api.get(f"{helper_path(cid)}/turns")).json()["turns"]
    assert [t["turn_id"] for t in turns] == [turn_id]


async def test_without_key_every_request_is_a_new_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    a = await api.post(url, json={"input": "same"})
    b = await api.post(url, json={"input": "same", "mode": "wait"})
    assert a.json()["turn_id"] != b.json()["turn_id"]
    assert b.json()["status"] == "completed"
    assert fake_model.calls(cid) == 2
