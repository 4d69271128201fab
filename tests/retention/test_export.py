"""`GET /v1/agents/{agent}/conversations/{cid}/export` (issue 37): the whole conversation as
JSON (its tree with every branch, its turn records with their answers, its workspace's
listing, memory blocks and summaries), for its own tenant only."""

from __future__ import annotations

import pytest

from tests._stack import bearer_client
from think.testing import FakeOpenAIServer, text, tool_call

pytestmark = pytest.mark.stack


async def test_a_conversation_is_exported_whole(
    tenants: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("write", {"path": "notes/todo.md", "content": "buy milk"}),
        text("written"),
        text("the second answer"),
        text("another second answer"),
    )
    base = f"/v1/agents/workspaced/conversations/{cid}"
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        for words in ("note it", "and then?"):
            done = await alice.post(f"{base}/turns", json={"input": words, "mode": "wait"})
            assert done.json()["status"] == "completed", done.text
        second = done.json()
        again = await alice.post(
            f"{base}/regenerate", json={"message_id": second["message_id"], "mode": "wait"}
        )
        assert again.status_code == 200, again.text

        exported = await alice.get(f"{base}/export")
        assert exported.status_code == 200, exported.text
        body = exported.json()
        assert body["conversation"]["id"] == cid
        # The tree: both answers to the second question, as siblings.
        messages = body["messages"]
        by_id = {m["id"]: m for m in messages}
        answers = [m for m in messages if m["role"] == "assistant"]
        assert len(answers) == 3
        assert answers[1]["parent_id"] == answers[2]["parent_id"]
        assert by_id[answers[1]["parent_id"]]["role"] == "user"
        leaf = body["conversation"]["active_leaf_id"]
        assert leaf == answers[2]["id"]
        # Every turn, oldest first, with its answer.
        turns = body["turns"]
        assert [t["status"] for t in turns] == ["completed"] * 3
        assert turns[0]["message"]["parts"][-1]["text"] == "written"
        # The workspace's listing, not its bytes.
        assert [(f["path"], f["size"]) for f in body["workspace"]] == [("notes/todo.md", 8)]
        assert body["context_blocks"] == [] and body["compactions"] == []

        # Another tenant's conversation of the same id is none of its business.
        refused = await bob.get(f"{base}/export")
        assert refused.status_code == 404
        assert refused.headers["content-type"] == "application/problem+json"
