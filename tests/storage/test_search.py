"""Full-text search over a conversation: `GET …/conversations/{cid}/search` and its SQL.

Messages go in through `POST …/messages` (no model turn) and one tool turn through the worker
and the fake model, so `text_content` and its `tsvector` are what production writes; searches
go through the real gateway. What needs more than HTTP allows (another tenant, a tool output
over the body limit, a long conversation with a small window) is tested on `search_messages`
with the store's own insert.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests._turn_helpers import helper_path
from think import ThinkService
from think._messages import SEARCH_TEXT_LIMIT, UIMessage, search_text, text_of
from think._settings import Settings
from think.storage import (
    Conversation,
    SearchHit,
    Store,
    chain_leaf,
    open_database,
    search_messages,
)
from think.testing import FakeOpenAIServer, text, tool_call


@pytest.fixture(scope="module")
async def store(settings: Settings) -> AsyncIterator[Store]:
    db = await open_database(settings, max_size=2)
    try:
        yield Store(db)
    finally:
        await db.close()


async def conversation(
    store: Store, cid: str, *, tenant: str = "default", agent: str = "helper"
) -> Conversation:
    conv, _ = await store.create_conversation(
        tenant=tenant, agent=agent, conversation_id=cid, metadata={}
    )
    return conv


async def post(
    api: httpx.AsyncClient,
    cid: str,
    *messages: UIMessage,
    parent_id: str | None = None,
    agent: str = "helper",
) -> list[str]:
    """`POST …/messages`: a chain under `parent_id` (the active leaf by default)."""
    body: dict[str, Any] = {"messages": [m.wire() for m in messages]}
    if parent_id is not None:
        body["parent_id"] = parent_id
    response = await api.post(f"/v1/agents/{agent}/conversations/{cid}/messages", json=body)
    assert response.status_code == 201, response.text
    return [m.id for m in messages]


async def add(
    store: Store, conv: Conversation, *messages: UIMessage, parent_id: str | None = None
) -> list[str]:
    """The store's insert, as a turn runs it: a chain under `parent_id`."""
    async with store.db.transaction() as conn:
        stored = await store.insert_messages(
            conn, conv.uid, messages, parent_id=parent_id, turn_id=None
        )
        leaf = chain_leaf(stored, parent_id)
        assert leaf is not None
        await store.set_active_leaf(conn, conv.uid, leaf)
    return [m.id for m in messages]


def user(words: str) -> UIMessage:
    return UIMessage.user_text(words)


def assistant(*parts: dict[str, Any]) -> UIMessage:
    return UIMessage(role="assistant", parts=list(parts))


async def search(api: httpx.AsyncClient, cid: str, q: str, **params: Any) -> list[dict[str, Any]]:
    response = await api.get(f"{helper_path(cid)}/search", params={"q": q, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["hits"]
    for hit in body["hits"]:
        assert set(hit) == {"message_id", "role", "snippet", "rank"}
        assert isinstance(hit["rank"], float)
    hits: list[dict[str, Any]] = body["hits"]
    return hits


# -- ranking, snippets, stemming ---------------------------------------------------------------


async def test_better_matches_rank_first(api: httpx.AsyncClient, cid: str) -> None:
    once, unrelated, often, both = await post(
        api,
        cid,
        user("The deploy to staging went fine yesterday."),
        user("Lunch is at noon in the usual place."),
        user("Deploy failed. The deploy log says the deploy key expired, so redeploy."),
        user("The deploy failed because the database migration timed out."),
    )
    hits = await search(api, cid, "deploy")
    assert {h["message_id"] for h in hits} == {once, often, both}
    assert hits[0]["message_id"] == often  # three mentions beat one
    assert [h["rank"] for h in hits] == sorted((h["rank"] for h in hits), reverse=True)
    assert all(0 < h["rank"] < 1 for h in hits)

    # Words must all be there; `or` widens the match and `-word` excludes.
    hits = await search(api, cid, "deploy database")
    assert [h["message_id"] for h in hits] == [both]
    hits = await search(api, cid, "database or lunch")
    assert {h["message_id"] for h in hits} == {both, unrelated}
    assert unrelated not in {h["message_id"] for h in await search(api, cid, "deploy -lunch")}


async def test_snippets_highlight_the_matches(api: httpx.AsyncClient, cid: str) -> None:
    filler = " ".join(f"word{i}" for i in range(200))
    [long_id] = await post(api, cid, user(f"{filler} the invoice was paid late {filler}"))
    [hit] = await search(api, cid, "invoice")
    assert hit["message_id"] == long_id
    assert hit["role"] == "user"
    assert "<mark>invoice</mark>" in hit["snippet"]
    assert len(hit["snippet"]) < 400  # a fragment around the match, not the whole message
    # Phrases match in order and every matched word is marked.
    [hit] = await search(api, cid, '"paid late"')
    assert "<mark>paid</mark> <mark>late</mark>" in hit["snippet"]


async def test_snippets_are_escaped_html(api: httpx.AsyncClient, cid: str) -> None:
    await post(api, cid, user('Wrap it in <div class="panel"> & use <script>alert(1)</script>'))
    [hit] = await search(api, cid, "panel")
    snippet = hit["snippet"]
    assert "<script>" not in snippet and "<div" not in snippet
    assert "&lt;script&gt;" in snippet and "&amp;" in snippet
    assert '&lt;div class="<mark>panel</mark>"&gt;' in snippet
    # Words between angle brackets are indexed too (Postgres's parser would take `<b and c>`
    # for a tag and drop every word in it).
    await post(api, cid, user("if a<b and cats>d then stop"))
    assert len(await search(api, cid, "cats")) == 1


async def test_stemming(api: httpx.AsyncClient, cid: str) -> None:
    [ran] = await post(api, cid, user("She was running the migrations all night."))
    for query in ("run", "runs", "running", "RUNNING", "migration"):
        hits = await search(api, cid, query)
        assert [h["message_id"] for h in hits] == [ran], query
    [hit] = await search(api, cid, "run")
    assert "<mark>running</mark>" in hit["snippet"]


# -- what is searched ---------------------------------------------------------------------------


async def test_tool_calls_are_searchable(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Through a real turn: the worker stores the tool part, and search finds its name, input
    and output."""
    fake_model.script(
        cid,
        tool_call("get_weather", {"city": "Reykjavik"}, id="call_w"),
        text("Cold, as usual."),
    )
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "How is it up north?", "mode": "wait"}
    )
    turn = response.json()
    assert turn["status"] == "completed", turn
    for query in ("Reykjavik", "get_weather", "weather", "temp_c", "cold"):
        hits = await search(api, cid, query)
        assert [(h["message_id"], h["role"]) for h in hits] == [
            (turn["message_id"], "assistant")
        ], query
    [hit] = await search(api, cid, "Reykjavik")
    assert "<mark>Reykjavik</mark>" in hit["snippet"]


async def test_tool_errors_and_dynamic_tools_are_searchable(
    api: httpx.AsyncClient, cid: str
) -> None:
    [message_id] = await post(
        api,
        cid,
        assistant(
            {"type": "step-start"},
            {"type": "reasoning", "text": "Perhaps the mainframe is asleep."},
            {
                "type": "dynamic-tool",
                "toolName": "fetch_ledger",
                "toolCallId": "c1",
                "state": "output-error",
                "input": {"branch": "Zürich"},
                "errorText": "connection refused by upstream",
            },
        ),
    )
    for query in ("fetch_ledger", "ledger", "Zürich", "zürich", "refused upstream"):
        assert [h["message_id"] for h in await search(api, cid, query)] == [message_id], query
    # Reasoning is the model's working, not what was said: not indexed.
    assert await search(api, cid, "mainframe") == []


def test_search_text() -> None:
    parts: list[dict[str, Any]] = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "hidden"},
        {"type": "text", "text": "Look: x < y & z"},
        {
            "type": "tool-get_weather",
            "toolCallId": "c",
            "state": "output-available",
            "input": {"city": "Malmö"},
            "output": "sunny",
        },
    ]
    assert text_of(parts) == 'Look: x < y & z\nget_weather\n{"city": "Malmö"}\nsunny'
    assert search_text(parts) == 'Look: x &lt; y &amp; z\nget_weather\n{"city": "Malmö"}\nsunny'
    huge = [{"type": "text", "text": "a" * (SEARCH_TEXT_LIMIT * 3)}]
    assert len(search_text(huge)) == SEARCH_TEXT_LIMIT


async def test_huge_tool_output_is_stored_and_found(store: Store, cid: str) -> None:
    """A tool output far over Postgres's 1 MB tsvector limit must not fail the INSERT."""
    conv = await conversation(store, cid)
    noise = " ".join(secrets.token_hex(6) for _ in range(300_000))  # ~4 MB of distinct words
    [message_id] = await add(
        store,
        conv,
        assistant(
            {
                "type": "tool-dump",
                "toolCallId": "c",
                "state": "output-available",
                "input": {},
                "output": "needle " + noise,
            }
        ),
    )
    hits = await search_messages(store.db, conv.uid, "needle")
    assert [h.message_id for h in hits] == [message_id]


async def test_every_branch_is_searched(api: httpx.AsyncClient, cid: str) -> None:
    [root] = await post(api, cid, user("Plan the offsite."))
    [first] = await post(api, cid, assistant({"type": "text", "text": "Lisbon in May."}))
    # A regenerated answer: a sibling branch, which becomes the active one.
    [second] = await post(
        api, cid, assistant({"type": "text", "text": "Lisbon or Porto."}), parent_id=root
    )
    hits = await search(api, cid, "lisbon")
    assert {h["message_id"] for h in hits} == {first, second}
    assert hits[0]["message_id"] == second  # equal rank: the newest first


async def test_long_conversations_rank_the_newest_matches(store: Store, cid: str) -> None:
    """Past `window` messages, a word matching at least `limit` of the newest `window` is
    ranked among those only; a rarer one is looked for further back, at most `older` rows."""
    conv = await conversation(store, cid)
    # The same number of words each, so that every single-word match ranks the same.
    extra = ["kiwi", "cherry", "kiwi", "kiwi", "kiwi", "kiwi", "banana", "date", "kiwi", "banana"]
    ids = await add(store, conv, *(user(f"apple {w} number {i}") for i, w in enumerate(extra)))

    async def found(query: str, limit: int = 20, older: int = 3) -> list[str]:
        hits = await search_messages(store.db, conv.uid, query, limit=limit, window=4, older=older)
        return [h.message_id for h in hits]

    # Every message matches; the newest four are enough for a page of two.
    assert await found("apple", limit=2) == [ids[9], ids[8]]  # same rank: newest first
    assert await found("apple", limit=4) == ids[6:][::-1]
    # Fewer than `limit` in the window: older matches join them, best first.
    assert await found("banana") == [ids[9], ids[6]]
    assert await found("cherry") == [ids[1]]
    assert await found("cherry or date") == [ids[7], ids[1]]
    # At most `older` of them, whichever the index yields first.
    older = await found("number", limit=10, older=3)
    assert older[:4] == ids[6:][::-1] and len(older) == 7
    assert set(older[4:]) < set(ids[:6])
    assert await found("nothing") == []
    # Negations and phrases: older rows are capped on a looser query (phrases as AND, no
    # negations), then checked against the query itself.
    assert await found("apple -kiwi", older=10) == [ids[9], ids[7], ids[6], ids[1]]
    assert await found("-kiwi", older=10) == [ids[9], ids[7], ids[6], ids[1]]
    phrase = await found('"apple kiwi"', older=3)
    assert phrase[0] == ids[8] and len(phrase) == 4
    assert set(phrase[1:]) < {ids[i] for i in (0, 2, 3, 4, 5)}
    assert await found('"kiwi apple"', older=10) == []
    # A conversation shorter than the window is searched whole.
    assert len(await found("apple", limit=20, older=0)) == 4
    assert await found("cherry", older=0) == []
    hits = await search_messages(store.db, conv.uid, "apple", limit=20, window=20, older=0)
    assert len(hits) == 10


# -- limits and isolation -----------------------------------------------------------------------


async def test_limit_and_tie_order(api: httpx.AsyncClient, cid: str) -> None:
    ids = await post(api, cid, *(user(f"Reminder number {i}: water the plants") for i in range(30)))
    hits = await search(api, cid, "plants")
    assert len(hits) == 20  # the default
    assert [h["message_id"] for h in hits] == ids[::-1][:20]  # same rank: newest first
    assert len(await search(api, cid, "plants", limit=5)) == 5
    assert len(await search(api, cid, "plants", limit=100)) == 30


async def test_other_conversations_are_never_searched(api: httpx.AsyncClient, cid: str) -> None:
    [own] = await post(api, cid, user("The pelican is on the roof."))
    await post(api, f"{cid}-other", user("The pelican is on the roof."))
    await post(api, cid, user("The pelican is on the roof."), agent="assistant")
    assert [h["message_id"] for h in await search(api, cid, "pelican")] == [own]


async def test_other_tenants_are_never_searched(store: Store, cid: str) -> None:
    """The gateway finds the conversation by (tenant, agent, id) like every other route
    (tests/api/test_auth.py); the search then only ever reads that conversation's rows."""
    alice = await conversation(store, cid, tenant="alice")
    bob = await conversation(store, cid, tenant="bob")
    assert alice.uid != bob.uid
    [alices] = await add(store, alice, user("The treasure is under the oak."))
    [bobs] = await add(store, bob, user("My treasure is my family."))
    assert [h.message_id for h in await search_messages(store.db, alice.uid, "treasure")] == [
        alices
    ]
    hits = await search_messages(store.db, bob.uid, "treasure oak")
    assert hits == []
    [hit] = await search_messages(store.db, bob.uid, "treasure")
    assert isinstance(hit, SearchHit) and hit.message_id == bobs


# -- bad and odd queries -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["the and of", "!!! ,,, ---", "-", "or", '"', '"unclosed phrase', "a & | ! ( )", "'", "::*"],
)
async def test_queries_that_match_nothing_answer_no_hits(
    api: httpx.AsyncClient, cid: str, query: str
) -> None:
    await post(api, cid, user("the and of or a"))
    assert await search(api, cid, query) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "a\x00b"}, "q"),
        ({"q": "x" * 1001}, "q"),
        ({"q": "hi", "limit": "0"}, "limit"),
        ({"q": "hi", "limit": "101"}, "limit"),
        ({"q": "hi", "limit": "many"}, "limit"),
    ],
)
async def test_bad_parameters_are_422(
    api: httpx.AsyncClient, cid: str, params: dict[str, str], field: str
) -> None:
    await post(api, cid, user("Something to search."))
    response = await api.get(f"{helper_path(cid)}/search", params=params)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == [field]


async def test_unknown_conversation_is_404(api: httpx.AsyncClient, cid: str) -> None:
    response = await api.get(f"{helper_path(cid)}/search", params={"q": "anything"})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert cid in response.json()["detail"]
    response = await api.get(f"/v1/agents/nobody/conversations/{cid}/search", params={"q": "x"})
    assert response.status_code == 404


async def test_search_from_python_matches_http(
    api: httpx.AsyncClient, service: ThinkService, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    await conv.add_messages(
        [user("the lighthouse keeper logs storms"), user("nothing to see here")]
    )
    hits = await conv.search("lighthouse storms")
    assert [h.snippet for h in hits] == [
        h["snippet"] for h in await search(api, cid, "lighthouse storms")
    ]
    assert len(hits) == 1 and "<mark>lighthouse</mark>" in hits[0].snippet
    assert await service.conversation("helper", f"{cid}-none").search("lighthouse") == []
