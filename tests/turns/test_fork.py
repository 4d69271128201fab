"""Forking a conversation at a message: a new conversation whose history is a copy of the
path up to it (its turns, workspace and memory stay the original's), made in one transaction
or not at all; over HTTP (`POST …/fork`) and from Python (`ConversationHandle.fork`)."""

from __future__ import annotations

import httpx
import pytest

from tests._turn_helpers import sent, stored_texts, wait_turn
from think import ThinkService, UIMessage
from think.storage import ForkPointNotFound, ForkTargetExists
from think.testing import FakeOpenAIServer, text

BASE = "/v1/agents/helper/conversations"


async def history(api: httpx.AsyncClient, cid: str) -> list[tuple[str, str]]:
    return await stored_texts(api, "helper", cid)


async def test_a_fork_holds_the_path_up_to_the_message_and_goes_its_own_way(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("one"), text("two"))
    first = await wait_turn(api, "helper", cid, "first?")
    await wait_turn(api, "helper", cid, "second?")
    answer_one = first["message"]["id"]

    response = await api.post(
        f"{BASE}/{cid}/fork", json={"message_id": answer_one, "metadata": {"from": cid}}
    )
    assert response.status_code == 201, response.text
    fork = response.json()
    assert fork["id"] != cid and fork["id"].startswith("conv")
    assert (fork["agent"], fork["active_leaf_id"], fork["metadata"]) == (
        "helper",
        answer_one,
        {"from": cid},
    )
    assert await history(api, fork["id"]) == [("user", "first?"), ("assistant", "one")]
    assert (await api.get(f"{BASE}/{fork['id']}/turns")).json() == {"turns": []}

    # The fork's next turn reads the copied path; the original is untouched.
    fake_model.script(fork["id"], text("forked"))
    await wait_turn(api, "helper", fork["id"], "instead?")
    assert [m["content"] for m in sent(fake_model, fork["id"], 0)[1:]] == [
        "first?",
        "one",
        "instead?",
    ]
    assert await history(api, cid) == [
        ("user", "first?"),
        ("assistant", "one"),
        ("user", "second?"),
        ("assistant", "two"),
    ]


async def test_a_fork_that_cannot_be_made_leaves_nothing_and_says_why(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("one"))
    done = await wait_turn(api, "helper", cid, "hi")
    at = {"message_id": done["message"]["id"]}
    fork_id = f"{cid}-fork"

    missing = await api.post(f"{BASE}/{cid}/fork", json={"message_id": "nope", "id": fork_id})
    assert missing.status_code == 404, missing.text
    assert "'nope' is not in conversation" in missing.json()["detail"]
    assert (await api.get(f"{BASE}/{fork_id}")).status_code == 404  # rolled back

    assert (await api.post(f"{BASE}/{cid}/fork", json={**at, "id": fork_id})).status_code == 201
    taken = await api.post(f"{BASE}/{cid}/fork", json={**at, "id": fork_id})
    assert taken.status_code == 409 and "exists already" in taken.json()["detail"]

    for body, field in [({}, "message_id"), ({**at, "id": "bad id"}, "id")]:
        refused = await api.post(f"{BASE}/{cid}/fork", json=body)
        assert refused.status_code == 422, refused.text
        assert field in refused.text
    unknown = await api.post(f"{BASE}/no-such-{cid}/fork", json=at)
    assert unknown.status_code == 404


async def test_fork_from_python_copies_the_configuration(service: ThinkService, cid: str) -> None:
    conv = service.conversation("helper", cid)
    await conv.add_messages(
        [
            UIMessage.user_text("a", id="m1"),
            UIMessage(id="m2", role="assistant", parts=[{"type": "text", "text": "b"}]),
            UIMessage.user_text("c", id="m3"),
        ]
    )
    await conv.configure({"tone": "dry"})
    fork = await conv.fork("m2", id=f"{cid}-py")
    assert fork.conversation_id == f"{cid}-py"
    assert [m.id for m in await fork.messages()] == ["m1", "m2"]
    assert await fork.get_config() == {"tone": "dry"}
    with pytest.raises(ForkTargetExists):
        await conv.fork("m2", id=f"{cid}-py")
    with pytest.raises(ForkPointNotFound):
        await conv.fork("m9")
