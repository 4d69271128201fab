"""The message tree: regenerate, branches, siblings, switching the active branch, appending
without a turn, and a multi-megabyte message, through the real gateway, worker and Postgres.

Nothing in the tree is ever deleted: every answer a test produces stays reachable by
`GET …/messages?leaf_id=…`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._sse import chunks, deltas, finished, read_stream, read_until, started, until_terminal
from tests._turn_helpers import helper_path, sent, stored_rows
from think._messages import UIMessage
from think._settings import Settings
from think.storage import MessageNotFound, NotRegenerable, Store, open_database
from think.testing import FakeOpenAIServer, stall, text
from think.turns._dispatch import hand_off

PROBLEM = "application/problem+json"
SYSTEM = {"role": "system", "content": "You are a test agent."}


# -- helpers --------------------------------------------------------------------------------


async def ask(api: httpx.AsyncClient, cid: str, words: str, **extra: Any) -> dict[str, Any]:
    """Submit a turn and wait for it; returns the completed Turn."""
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": words, "mode": "wait", **extra}
    )
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    return turn


async def regenerate(
    api: httpx.AsyncClient, cid: str, message_id: str, *, key: str | None = None, **extra: Any
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return await api.post(
        f"{helper_path(cid)}/regenerate", json={"message_id": message_id, **extra}, headers=headers
    )


async def path(api: httpx.AsyncClient, cid: str, leaf_id: str | None = None) -> list[str]:
    """The texts along the active path (or the path to `leaf_id`), root first."""
    return [_text(m) for m in await messages(api, cid, leaf_id)]


async def messages(
    api: httpx.AsyncClient, cid: str, leaf_id: str | None = None
) -> list[dict[str, Any]]:
    params = {"leaf_id": leaf_id} if leaf_id else {}
    response = await api.get(f"{helper_path(cid)}/messages", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def siblings(api: httpx.AsyncClient, cid: str, message_id: str) -> tuple[list[str], int]:
    response = await api.get(f"{helper_path(cid)}/messages/{message_id}/siblings")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"messages", "active_index"}
    return [m["id"] for m in body["messages"]], body["active_index"]


async def switch(api: httpx.AsyncClient, cid: str, leaf_id: str, **extra: Any) -> dict[str, Any]:
    response = await api.put(f"{helper_path(cid)}/active-leaf", json={"leaf_id": leaf_id, **extra})
    assert response.status_code == 200, response.text
    conversation: dict[str, Any] = response.json()
    assert set(conversation) == {"id", "agent", "created_at", "active_leaf_id", "metadata"}
    return conversation


async def add(
    api: httpx.AsyncClient, cid: str, *batch: dict[str, Any], parent_id: str | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"messages": list(batch)}
    if parent_id is not None:
        body["parent_id"] = parent_id
    return await api.post(f"{helper_path(cid)}/messages", json=body)


def user(id: str, words: str) -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": words}]}


def assistant(id: str, words: str) -> dict[str, Any]:
    return {"id": id, "role": "assistant", "parts": [{"type": "text", "text": words}]}


def _text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail"} <= set(body)
    assert body["status"] == status
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


async def active_leaf(api: httpx.AsyncClient, cid: str) -> str:
    leaf: str = (await api.get(helper_path(cid))).json()["active_leaf_id"]
    return leaf


# -- regenerate and branches -------------------------------------------------------------------


async def test_regenerate_twice_keeps_every_answer(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("First answer."), text("Second answer."), text("Third answer."))
    first = await ask(api, cid, "Tell me a joke.")
    question, a1 = [m["id"] for m in await messages(api, cid)]
    assert a1 == first["message_id"]

    response = await regenerate(api, cid, a1, mode="wait")
    assert response.status_code == 200, response.text
    second = response.json()
    assert second["status"] == "completed" and second["accepted"] is True
    a2 = second["message_id"]
    assert a2 != a1 and _text(second["message"]) == "Second answer."
    assert await path(api, cid) == ["Tell me a joke.", "Second answer."]
    assert await active_leaf(api, cid) == a2

    # Regenerating the newest answer is the same as regenerating any of its siblings: a new
    # answer to the same question. Plain submit mode: 202, then the stream.
    response = await regenerate(api, cid, a2)
    assert response.status_code == 202, response.text
    third = response.json()
    assert third["accepted"] is True and third["status"] in ("pending", "running", "completed")
    _, events = await read_stream(api, third["stream_url"])
    got = chunks(events)
    assert started(got[0]) == {"type": "start", "messageId": third["message_id"]}
    assert finished(got[-1]) == {"type": "finish", "finishReason": "stop"}
    a3 = third["message_id"]

    # Every answer is kept and reachable; the newest is the active one.
    assert await path(api, cid) == ["Tell me a joke.", "Third answer."]
    assert await path(api, cid, a1) == ["Tell me a joke.", "First answer."]
    assert await path(api, cid, a2) == ["Tell me a joke.", "Second answer."]
    assert await path(api, cid, a3) == ["Tell me a joke.", "Third answer."]
    assert await siblings(api, cid, a1) == ([a1, a2, a3], 2)
    assert await siblings(api, cid, a3) == ([a1, a2, a3], 2)
    assert await siblings(api, cid, question) == ([question], 0)

    # A regenerate appends no user message, and the model never sees the answer it replaces.
    for call in (1, 2):
        assert sent(fake_model, cid, call) == [
            SYSTEM,
            {"role": "user", "content": "Tell me a joke."},
        ]
    assert fake_model.pending(cid) == 0

    # Switching the branch changes what is shown and what the next turn answers.
    conversation = await switch(api, cid, a1)
    assert conversation["active_leaf_id"] == a1
    assert await path(api, cid) == ["Tell me a joke.", "First answer."]
    assert await siblings(api, cid, a3) == ([a1, a2, a3], 0)
    fake_model.script(cid, text("Glad you liked it."))
    follow = await ask(api, cid, "Ha! Another?")
    assert sent(fake_model, cid, 3) == [
        SYSTEM,
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "First answer."},
        {"role": "user", "content": "Ha! Another?"},
    ]
    assert await path(api, cid) == [
        "Tell me a joke.",
        "First answer.",
        "Ha! Another?",
        "Glad you liked it.",
    ]

    # Switching to any message lands on the newest leaf below it: back to the third answer,
    # then to the first answer's branch as it was last extended; `exact` stops where told.
    assert (await switch(api, cid, a3))["active_leaf_id"] == a3
    assert (await switch(api, cid, a1))["active_leaf_id"] == follow["message_id"]
    assert (await switch(api, cid, question))["active_leaf_id"] == a3  # its newest child
    assert (await switch(api, cid, a1, exact=True))["active_leaf_id"] == a1
    assert await path(api, cid) == ["Tell me a joke.", "First answer."]


async def test_old_answer_stays_active_while_the_new_one_streams(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Old."), text("New") + stall(1.5) + text(" answer."))
    await ask(api, cid, "Hi")
    [_, old] = [m["id"] for m in await messages(api, cid)]
    response = await regenerate(api, cid, old)
    assert response.status_code == 202, response.text
    turn = response.json()
    await read_until(api, turn["stream_url"], deltas(1))
    assert (await api.get(turn["status_url"])).json()["status"] == "running"
    assert await active_leaf(api, cid) == old
    assert await path(api, cid) == ["Hi", "Old."]
    assert (await until_terminal(api, turn["status_url"]))["status"] == "completed"
    assert await active_leaf(api, cid) == turn["message_id"]
    assert await path(api, cid) == ["Hi", "New answer."]


async def test_regenerate_is_idempotent_by_key(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("One."), text("Two."))
    await ask(api, cid, "Count")
    [question, answer] = [m["id"] for m in await messages(api, cid)]
    first = await regenerate(api, cid, answer, key="regen-1")
    assert first.status_code == 202, first.text
    again = await regenerate(api, cid, answer, key="regen-1", mode="wait")
    assert again.status_code == 200, again.text
    assert again.json()["turn_id"] == first.json()["turn_id"]
    assert again.json()["accepted"] is False and again.json()["status"] == "completed"
    # The same key for another request (a submission, or another message) is a conflict.
    other = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "Count"}, headers={"Idempotency-Key": "regen-1"}
    )
    problem(other, 409)
    problem(await regenerate(api, cid, again.json()["message_id"], key="regen-1"), 409)
    # A request that is wrong whatever the key says is refused as such.
    problem(await regenerate(api, cid, question, key="regen-1"), 422, "message_id")
    # One regenerate ran: two answers in all, one model call each.
    assert (await siblings(api, cid, answer))[0] == [answer, first.json()["message_id"]]
    assert fake_model.calls(cid) == 2


async def test_regenerate_problems(
    api: httpx.AsyncClient, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    problem(await regenerate(api, cid, "msg_nope"), 404)  # no such conversation
    fake_model.script(cid, text("Sure."))
    await ask(api, cid, "Hello")
    [question, _] = [m["id"] for m in await messages(api, cid)]
    body = problem(await regenerate(api, cid, "msg_nope"), 404, "message_id")
    assert "'msg_nope'" in body["detail"]
    body = problem(await regenerate(api, cid, question), 422, "message_id")
    assert "user message" in body["detail"]
    problem(await api.post(f"{helper_path(cid)}/regenerate", json={}), 422, "message_id")
    problem(await regenerate(api, cid, "x\x00y"), 422, "message_id")
    # An assistant message at the root answers nothing: there is nothing to answer again.
    other = f"{cid}-root"
    assert (await add(api, other, assistant("greeting", "Welcome!"))).status_code == 201
    problem(await regenerate(api, other, "greeting"), 422, "message_id")
    # None of these made a turn.
    async with engine.connect() as conn:
        count = await conn.scalar(
            sql(
                "SELECT count(*) FROM turns t JOIN conversations c ON c.uid = t.conversation_uid "
                "WHERE c.id IN (:a, :b)"
            ),
            {"a": cid, "b": other},
        )
    assert count == 1


async def test_branch_from_any_message_with_parent_id(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("A1."), text("A2."), text("A2, edited."))
    first = await ask(api, cid, "Q1")
    second = await ask(api, cid, "Q2")
    assert await path(api, cid) == ["Q1", "A1.", "Q2", "A2."]
    [_, _, q2, _] = [m["id"] for m in await messages(api, cid)]

    # Edit the second question: a sibling of it, under the first answer.
    edited = await ask(api, cid, "Q2, edited", parent_id=first["message_id"])
    assert sent(fake_model, cid, 2) == [
        SYSTEM,
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1."},
        {"role": "user", "content": "Q2, edited"},
    ]
    assert await path(api, cid) == ["Q1", "A1.", "Q2, edited", "A2, edited."]
    assert await path(api, cid, second["message_id"]) == ["Q1", "A1.", "Q2", "A2."]
    q2_edited = (await messages(api, cid))[2]["id"]
    assert await siblings(api, cid, q2) == ([q2, q2_edited], 1)
    assert await siblings(api, cid, edited["message_id"]) == ([edited["message_id"]], 0)
    # Back to the original branch through its question.
    assert (await switch(api, cid, q2))["active_leaf_id"] == second["message_id"]
    assert await siblings(api, cid, q2) == ([q2, q2_edited], 0)

    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "Q3", "parent_id": "msg_nope"}
    )
    problem(response, 422, "parent_id")


async def test_reading_and_switching_unknown_messages(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hi."))
    await ask(api, cid, "Hello")
    leaf = await active_leaf(api, cid)
    base = helper_path(cid)
    problem(await api.get(f"{base}/messages", params={"leaf_id": "msg_nope"}), 404)
    problem(await api.get(f"{base}/messages/msg_nope/siblings"), 404, "message_id")
    response = await api.put(f"{base}/active-leaf", json={"leaf_id": "msg_nope"})
    problem(response, 404, "leaf_id")
    response = await api.put(f"{base}/active-leaf", json={"leaf_id": "msg_nope", "exact": True})
    problem(response, 404, "leaf_id")
    problem(await api.put(f"{base}/active-leaf", json={}), 422, "leaf_id")
    assert await active_leaf(api, cid) == leaf
    missing = helper_path(f"{cid}-missing")
    problem(await api.get(f"{missing}/messages/{leaf}/siblings"), 404)
    problem(await api.put(f"{missing}/active-leaf", json={"leaf_id": leaf}), 404)


# -- appending without a turn ------------------------------------------------------------------


async def test_add_messages_is_idempotent_by_id(
    api: httpx.AsyncClient, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    batch = [user("m1", "What is a quokka?"), assistant("m2", "A small marsupial.")]
    response = await add(api, cid, *batch)  # the conversation does not exist yet
    assert response.status_code == 201, response.text
    assert response.json() == {"messages": batch, "active_leaf_id": "m2"}
    assert await messages(api, cid) == batch
    assert fake_model.calls(cid) == 0  # no model turn

    # The same request again: nothing changes, the same answer.
    again = await add(api, cid, *batch)
    assert again.status_code == 201 and again.json() == response.json()
    # Appending continues from the active leaf; a known message in front is left alone.
    more = await add(api, cid, batch[1], user("m3", "Where do they live?"))
    assert more.status_code == 201 and more.json()["active_leaf_id"] == "m3"
    assert [m["id"] for m in await messages(api, cid)] == ["m1", "m2", "m3"]

    # The same id with other content: 409 naming the message, and nothing of the request is
    # written (m4 neither).
    changed = assistant("m2", "A kind of wallaby.")
    response = await add(api, cid, user("m4", "Hm?"), changed)
    body = problem(response, 409, "messages.1.id")
    assert "'m2'" in body["detail"]
    problem(await add(api, cid, {**batch[0], "metadata": {"x": 1}}), 409, "messages.0.id")
    problem(await add(api, cid, user("m5", "a"), user("m5", "a")), 409, "messages.1.id")
    assert [m["id"] for m in await messages(api, cid)] == ["m1", "m2", "m3"]
    assert (await stored_rows(engine, cid)).messages == 3

    # A branch under any message; the new message becomes the active leaf.
    response = await add(api, cid, assistant("m2b", "An island wallaby."), parent_id="m1")
    assert response.status_code == 201 and response.json()["active_leaf_id"] == "m2b"
    assert [m["id"] for m in await messages(api, cid)] == ["m1", "m2b"]
    assert await siblings(api, cid, "m2") == (["m2", "m2b"], 1)
    problem(await add(api, cid, user("m6", "?"), parent_id="msg_nope"), 422, "parent_id")
    problem(await add(api, cid), 422, "messages")
    problem(await add(api, cid, {"id": "m7", "role": "user", "parts": []}), 422, "messages.0.parts")
    problem(
        await add(
            api, cid, {"id": "m7", "role": "robot", "parts": [{"type": "text", "text": "x"}]}
        ),
        422,
        "messages.0.role",
    )

    # The next turn sees what was added.
    fake_model.script(cid, text("Rottnest Island."))
    await switch(api, cid, "m3")
    await ask(api, cid, "Really?")
    assert sent(fake_model, cid, 0) == [
        SYSTEM,
        {"role": "user", "content": "What is a quokka?"},
        {"role": "assistant", "content": "A small marsupial."},
        {"role": "user", "content": "Where do they live?"},
        {"role": "user", "content": "Really?"},
    ]


# -- the Python surface ------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def store(settings: Settings) -> AsyncIterator[Store]:
    db = await open_database(settings, max_size=2)
    try:
        yield Store(db)
    finally:
        await db.close()


async def test_store_tree_methods(
    api: httpx.AsyncClient,
    store: Store,
    settings: Settings,
    temporal: Any,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    """What the Python turn API calls: the same operations without HTTP."""
    conv, _ = await store.create_conversation(
        tenant="default", agent="helper", conversation_id=cid, metadata={}
    )
    appended = await store.add_messages(
        conv.uid,
        [
            UIMessage.user_text("Ping", id="p1"),
            UIMessage(id="p2", role="assistant", parts=[{"type": "text", "text": "Pong."}]),
        ],
    )
    assert appended.inserted == ["p1", "p2"] and appended.active_leaf_id == "p2"
    repeat = await store.add_messages(conv.uid, appended.messages)
    assert repeat.inserted == [] and repeat.active_leaf_id == "p2"

    admission = await store.regenerate(
        tenant="default", agent="helper", conversation_id=cid, message_id="p2"
    )
    assert admission.accepted
    request = admission.turn.request
    assert request.regenerates == "p2" and request.messages == [] and request.parent_id == "p1"
    fake_model.script(cid, text("Pong again."))
    await hand_off(store, temporal, settings.task_queue, admission.turn.id)
    turn_url = f"{helper_path(cid)}/turns/{admission.turn.id}"
    assert (await until_terminal(api, turn_url))["status"] == "completed"
    assert sent(fake_model, cid, 0) == [SYSTEM, {"role": "user", "content": "Ping"}]

    found = await store.siblings(conv.uid, "p2")
    assert [m.id for m in found.messages] == ["p2", admission.turn.message_id]
    assert found.active_index == 1
    switched = await store.switch_branch(conv.uid, "p1")
    assert switched.active_leaf_id == admission.turn.message_id
    switched = await store.switch_branch(conv.uid, "p2")
    assert switched.active_leaf_id == "p2"
    assert [m.id for m in await store.path(conv.uid, switched.active_leaf_id)] == ["p1", "p2"]

    with pytest.raises(NotRegenerable):
        await store.regenerate(
            tenant="default", agent="helper", conversation_id=cid, message_id="p1"
        )
    with pytest.raises(MessageNotFound):
        await store.regenerate(
            tenant="default", agent="helper", conversation_id=f"{cid}-x", message_id="p2"
        )
    with pytest.raises(MessageNotFound):
        await store.siblings(conv.uid, "nope")
    with pytest.raises(MessageNotFound):
        await store.switch_branch(conv.uid, "nope")


# -- a large message ---------------------------------------------------------------------------


def big_text(size: int) -> str:
    """`size` characters of everything JSON and Postgres must carry exactly: multi-byte
    characters, an emoji (a surrogate pair in JSON), escapes, quotes and line breaks."""
    unit = 'Größe 大きい 🦘 "quoted" \\ back\\slash\ttab\r\nline <b>&amp;</b> \u2028 end. '
    return (unit * (size // len(unit) + 1))[:size]


async def test_five_megabyte_message_round_trip(api: httpx.AsyncClient, cid: str) -> None:
    """A pasted document fits the default body limit (16 MiB, API.md)."""
    words = big_text(5 * 1024 * 1024)
    message = {
        "id": "big",
        "role": "user",
        "parts": [{"type": "text", "text": words}],
        "metadata": {"note": "five megabytes"},
    }
    response = await add(api, cid, message)
    assert response.status_code == 201, response.text[:500]
    stored = await messages(api, cid)
    assert len(stored) == 1
    [got] = stored
    assert got == message
    assert got["parts"][0]["text"].encode() == words.encode()
