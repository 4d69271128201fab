"""`think.tools.search_history`: the model searches its own conversation, and only it."""

from __future__ import annotations

import json

from tests.agents import Configured
from think import ThinkService, UIMessage
from think.testing import FakeOpenAIServer, text, tool_call
from think.tools import search_history
from think.tools._search_history import _plain


async def test_the_model_searches_its_own_history(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    mine = service.conversation(Configured, cid)
    await mine.add_messages(
        [
            UIMessage.user_text("My zebra is called <Stripes> & loves hay.", id="z1"),
            UIMessage.user_text("Unrelated: the weather is fine.", id="w1"),
        ]
    )
    other = service.conversation(Configured, f"{cid}-other")
    await other.add_messages(UIMessage.user_text("Another zebra, elsewhere.", id="z2"))

    fake_model.script(
        cid,
        tool_call("search_history", {"query": "zebra"}, id="c1"),
        tool_call("search_history", {"query": "zebra", "limit": 50}, id="c2"),
        text("Your zebra is Stripes."),
    )
    assert (await mine.run_turn("What is my zebra called?")).status == "completed"
    requests = [r["body"] for r in fake_model.requests(cid)]
    assert "search_history" in [t["function"]["name"] for t in requests[0]["tools"]]
    hits = json.loads(requests[1]["messages"][-1]["content"])
    # The question just asked matches too; the other conversation's zebra never does.
    found = [h["message_id"] for h in hits]
    assert len(found) == 2 and "z1" in found and "z2" not in found and "w1" not in found
    stored = next(h for h in hits if h["message_id"] == "z1")
    assert stored == {
        "message_id": "z1",
        "role": "user",
        "snippet": "**zebra** is called <Stripes> & loves hay",
    }
    error = requests[2]["messages"][-1]["content"]
    assert error == "Error: limit must be between 1 and 20, not 50"


def test_snippets_read_as_plain_text() -> None:
    assert _plain("a <mark>b</mark> &lt;mark&gt; &amp; c") == "a **b** <mark> & c"
    assert search_history.spec.parameters["required"] == ["query"]
