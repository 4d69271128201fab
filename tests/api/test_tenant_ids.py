"""Client-chosen ids are names within their tenant (issue 31).

A `submission_id` names one turn within its tenant: another tenant may use the same one for a
turn of its own, and learns nothing of the first (its answers are those for an id nobody has
used). Within a tenant the id still names one turn: reusing it in another conversation is a
409, as before. Turns recorded before ids were scoped (their row id is the client's id as it
was given) stay reachable under that id, and still hold it within their tenant.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._sse import Event, chunks, parse, read_stream, until_terminal
from tests._stack import bearer_client
from think import SubmissionConflict, ThinkService
from think.testing import FakeOpenAIServer, text


def _turns(cid: str) -> str:
    return f"/v1/agents/helper/conversations/{cid}/turns"


async def _ended(api: httpx.AsyncClient, cid: str, turn_id: str) -> dict[str, Any]:
    return await until_terminal(api, f"{_turns(cid)}/{turn_id}")


def _streamed(events: list[Event]) -> str:
    return "".join(str(c.get("delta", "")) for c in chunks(events))


def _answer(turn: dict[str, Any]) -> str:
    return str(turn["message"]["parts"][-1]["text"])


async def test_a_submission_id_names_one_turn_in_each_tenant(
    tenants: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    sid = f"{cid}-shared"
    fake_model.script(f"{cid}-bob", text("bob's answer"))
    fake_model.script(cid, text("alice's answer"))
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        # Bob takes the id first, in a conversation of his own.
        first = await bob.post(_turns(f"{cid}-bob"), json={"input": "b", "submission_id": sid})
        assert first.status_code == 202 and first.json()["turn_id"] == sid, first.text
        # Alice then uses the same id: a turn of her own, accepted as new.
        mine = await alice.post(_turns(cid), json={"input": "a", "submission_id": sid})
        assert mine.status_code == 202, mine.text
        assert mine.json()["turn_id"] == sid and mine.json()["accepted"] is True
        assert mine.json()["status_url"].endswith(f"/conversations/{cid}/turns/{sid}")
        # Each reads, streams and lists only its own.
        assert _answer(await _ended(alice, cid, sid)) == "alice's answer"
        assert _answer(await _ended(bob, f"{cid}-bob", sid)) == "bob's answer"
        async with alice.stream("GET", f"{_turns(cid)}/{sid}/stream") as response:
            assert response.headers["x-think-turn-id"] == sid
            body = (await response.aread()).decode()
        assert _streamed(parse(body)) == "alice's answer"
        _, events = await read_stream(bob, f"{_turns(f'{cid}-bob')}/{sid}/stream")
        assert _streamed(events) == "bob's answer"
        listed = (await alice.get(_turns(cid))).json()["turns"]
        assert [t["turn_id"] for t in listed] == [sid]
        # A repeat is a repeat of one's own submission, whatever the other tenant did.
        again = await alice.post(_turns(cid), json={"input": "a", "submission_id": sid})
        assert again.status_code == 200, again.text
        assert again.json()["turn_id"] == sid and again.json()["accepted"] is False
        changed = await bob.post(_turns(f"{cid}-bob"), json={"input": "x", "submission_id": sid})
        assert changed.status_code == 409 and changed.json()["turn_id"] == sid
        # Within a tenant the id still names one turn: another conversation cannot take it.
        elsewhere = await alice.post(_turns(f"{cid}-2"), json={"input": "a", "submission_id": sid})
        assert elsewhere.status_code == 409, elsewhere.text
        assert elsewhere.headers["content-type"] == "application/problem+json"
        assert elsewhere.json()["turn_id"] == sid
        assert "another conversation" in elsewhere.json()["detail"]
        # An ended turn is deleted by the id it was given, in its own tenant only.
        assert (await bob.delete(f"{_turns(cid)}/{sid}")).status_code == 404
        assert (await alice.delete(f"{_turns(cid)}/{sid}")).status_code == 204
        assert (await alice.get(f"{_turns(cid)}/{sid}")).status_code == 404
        assert (await bob.get(f"{_turns(f'{cid}-bob')}/{sid}")).status_code == 200


def _as_for(response: httpx.Response, turn_id: str) -> tuple[int, str, str]:
    """What an answer says, with the id it was asked about written as `ID`."""
    kind = response.headers.get("content-type", "")
    return response.status_code, kind, response.text.replace(turn_id, "ID")


async def test_another_tenants_ids_answer_as_unknown_ones(tenants: str, cid: str) -> None:
    used, unused = f"{cid}-alices", f"{cid}-nobodys"
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        # Alice's turn, in a conversation whose name bob uses too.
        await alice.post(_turns(cid), json={"input": "secret", "submission_id": used})
        assert (await _ended(alice, cid, used))["status"] == "completed"
        await bob.post(_turns(cid), json={"input": "his own", "mode": "wait"})
        # Every read of either id, by bob, answers the same.
        for tail in ("", "/stream", "/cancel"):
            method = "POST" if tail == "/cancel" else "GET"
            asked = [
                await bob.request(method, f"{_turns(cid)}/{turn_id}{tail}")
                for turn_id in (used, unused)
            ]
            assert asked[0].status_code == 404, asked[0].text
            assert _as_for(asked[0], used) == _as_for(asked[1], unused), tail
        # And so does submitting with it: each is a new turn of bob's.
        answers = [
            await bob.post(_turns(f"{cid}-{n}"), json={"input": "probe", "submission_id": turn_id})
            for n, turn_id in enumerate((used, unused))
        ]
        assert [a.status_code for a in answers] == [202, 202], answers[0].text
        assert [a.json()["accepted"] for a in answers] == [True, True]
        assert [a.json()["turn_id"] for a in answers] == [used, unused]
        assert sorted(answers[0].json()) == sorted(answers[1].json())
        # Alice's turn is as it was.
        turn = (await alice.get(f"{_turns(cid)}/{used}")).json()
        assert turn["status"] == "completed" and turn["message"]["parts"]


async def test_the_python_api_scopes_submission_ids_by_tenant(
    service: ThinkService, cid: str
) -> None:
    sid = f"{cid}-py"
    theirs = service.conversation("helper", cid, tenant="tenant-b")
    ours = service.conversation("helper", cid, tenant="tenant-a")
    first = await theirs.submit_messages("b", submission_id=sid)
    second = await ours.submit_messages("a", submission_id=sid)
    assert (first.turn_id, first.accepted) == (sid, True)
    assert (second.turn_id, second.accepted) == (sid, True)
    for conversation, said in ((ours, "a"), (theirs, "b")):
        ended = await conversation.result(sid)
        assert ended.status == "completed" and ended.turn_id == sid
        submission = await conversation.get_submission(sid)
        assert submission is not None and submission.turn_id == sid
        [asked, _] = await conversation.messages()
        assert asked.parts[0]["text"] == said
        assert [s.turn_id for s in await conversation.list_submissions()] == [sid]
    with pytest.raises(SubmissionConflict, match="another conversation"):
        await service.conversation("helper", f"{cid}-2", tenant="tenant-a").submit_messages(
            "a", submission_id=sid
        )


async def test_turns_recorded_before_scoping_stay_reachable(
    tenants: str, engine: AsyncEngine, cid: str
) -> None:
    """A turn recorded by the code before ids were scoped has the client's id as its row id.
    It is found by that id, its stream replays, a repeat answers it, and it keeps the id within
    its tenant, while another tenant may use the same id."""
    sid = f"{cid}-legacy"
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        request = {"input": "old", "submission_id": sid, "mode": "wait"}
        done = await bob.post(_turns(cid), json=request)
        assert done.status_code == 200 and done.json()["status"] == "completed"
        # Stored as before: the row's id (and what names it) is the client's id as given.
        async with engine.begin() as conn:
            old = (
                await conn.execute(
                    sql(
                        "SELECT t.id FROM turns t JOIN conversations c ON c.uid = "
                        "t.conversation_uid WHERE c.tenant = 'bob' AND c.id = :cid"
                    ),
                    {"cid": cid},
                )
            ).scalar_one()
            for statement in (
                "UPDATE turns SET id = :new WHERE id = :old",
                "UPDATE stream_chunks SET turn_id = :new WHERE turn_id = :old",
                "UPDATE messages SET turn_id = :new WHERE turn_id = :old",
            ):
                await conn.execute(sql(statement), {"new": sid, "old": old})
        turn = (await bob.get(f"{_turns(cid)}/{sid}")).json()
        assert turn["turn_id"] == sid and turn["status"] == "completed", turn
        _, events = await read_stream(bob, f"{_turns(cid)}/{sid}/stream")
        assert chunks(events)[-1]["type"] == "finish"
        repeat = await bob.post(_turns(cid), json=request)
        assert repeat.status_code == 200 and repeat.json()["accepted"] is False
        assert repeat.json()["turn_id"] == sid
        elsewhere = await bob.post(_turns(f"{cid}-2"), json=request)
        assert elsewhere.status_code == 409 and elsewhere.json()["turn_id"] == sid
        assert (await alice.get(f"{_turns(cid)}/{sid}")).status_code == 404
        hers = await alice.post(_turns(cid), json=request)
        assert hers.status_code == 200 and hers.json()["accepted"] is True, hers.text
        assert hers.json()["turn_id"] == sid
        assert (await bob.delete(f"{_turns(cid)}/{sid}")).status_code == 204
        assert (await alice.get(f"{_turns(cid)}/{sid}")).json()["status"] == "completed"
