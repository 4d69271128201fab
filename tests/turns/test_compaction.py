"""Compaction: older turns read by the model as one summary, while storage keeps every message.

The `compactor` agent (tests/agents.py) compacts after a turn that leaves over 120 tokens of
history (four characters a token), summarising with its own model, the fake, and keeping only
the newest message. What the model received is read back from the fake server; what storage
holds, from `GET …/messages`.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._logs import emitted
from tests._stack import Stack
from tests._turn_helpers import sent, stored_texts, wait_turn
from tests.agents import Compactor
from think import (
    Compaction,
    CompactionContext,
    CompactionResult,
    Session,
    Think,
    ThinkService,
    UIMessage,
    create_compact_function,
    default_token_counter,
    events,
)
from think._settings import Settings
from think.exceptions import UserError
from think.models import OfflineModel, Usage
from think.sessions._compaction import SUMMARY_HEADER, SUMMARY_SYSTEM, apply_summaries
from think.sessions._session import session_for
from think.storage._tables import CompactionRow
from think.testing import FakeOpenAIServer, reply, text

BASE = "/v1/agents/compactor/conversations"
WORDS = "lorem ipsum dolor sit amet consectetur "  # 39 characters


def words(tag: str, chars: int = 200) -> str:
    """`tag` padded to about `chars` characters: about chars / 4 tokens."""
    return (tag + " " + WORDS * (chars // len(WORDS) + 1))[:chars].rstrip()


async def stored(api: httpx.AsyncClient, cid: str) -> list[tuple[str, str]]:
    return await stored_texts(api, "compactor", cid)


async def turns_usage(api: httpx.AsyncClient, cid: str) -> list[dict[str, Any]]:
    """Each turn's own `usage`, as its view shows it."""
    response = await api.get(f"{BASE}/{cid}/turns")
    assert response.status_code == 200, response.text
    return [t["usage"] for t in response.json()["turns"]]


async def test_a_turn_over_compact_after_is_summarised_for_the_model_and_kept_in_storage(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    u1, a1, u2, a2 = words("first"), words("one"), words("second"), words("two")
    summarised = reply(text("They talked twice."), usage=Usage(input_tokens=500, output_tokens=7))
    fake_model.script(cid, text(a1), text(a2), summarised, text("three"))
    # 2 x 54 tokens: under 120, nothing happens
    await wait_turn(api, "compactor", cid, u1, status="completed")
    # 4 x 54: over, so the turn is followed by a compaction
    await wait_turn(api, "compactor", cid, u2, status="completed")
    got = await emitted(stack, cid, "chat.context.compacted", within=20)
    [compacted] = [e for e in got if e.type == "chat.context.compacted"]
    assert compacted.trigger == "between_turns"
    assert (compacted.messages_before, compacted.messages_after) == (4, 2)
    assert compacted.tokens_before == 4 * 54 and compacted.tokens_after < 120

    # The summarising request: the agent's model, with the older three messages as text.
    summarising = sent(fake_model, cid, 2)
    assert summarising[0] == {"role": "system", "content": SUMMARY_SYSTEM}
    prompt = summarising[1]["content"]
    assert f"User: {u1}" in prompt and f"Assistant: {a1}" in prompt and f"User: {u2}" in prompt
    assert a2 not in prompt
    headers = fake_model.requests(cid)[2]["headers"]
    assert headers["x-think-purpose"] == "compaction"
    # Reached through the agent's get_gateway, asked what it is for, after the turn's 1 step.
    assert headers["x-think-asked-for"] == "compaction"
    assert (headers["x-think-asked-trigger"], headers["x-think-asked-step"]) == ("submission", "1")
    # What the summary spent is the conversation's, priced at the endpoint the gateway picked
    # (2 and 8 dollars per million): 500 in, 7 out.
    turns = await turns_usage(api, cid)
    usage = (await api.get(f"{BASE}/{cid}/usage")).json()
    assert usage["turns"] == 2
    assert usage["input_tokens"] == sum(u["input_tokens"] for u in turns) + 500
    assert usage["output_tokens"] == sum(u["output_tokens"] for u in turns) + 7
    assert "priced/scripted-model" in usage["models"]
    assert not any("priced/scripted-model" in u["models"] for u in turns)

    await wait_turn(api, "compactor", cid, "and now?", status="completed")
    assert sent(fake_model, cid, 3) == [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": f"{SUMMARY_HEADER}\n\nThey talked twice."},
        {"role": "assistant", "content": a2},
        {"role": "user", "content": "and now?"},
    ]
    # Storage (and so every client) still has every message.
    assert await stored(api, cid) == [
        ("user", u1),
        ("assistant", a1),
        ("user", u2),
        ("assistant", a2),
        ("user", "and now?"),
        ("assistant", "three"),
    ]


async def test_compact_on_demand_from_python(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    service: ThinkService,
    engine: AsyncEngine,
    cid: str,
) -> None:
    # This process summarises with the fake too: the same settings as the worker's.
    priced = {"base_url": fake_model.base_url, "api_key": "k", "prices": {"input": 2, "output": 8}}
    endpoints = Settings.model_validate({"THINK_MODEL_ENDPOINTS": {"priced": priced}})
    settings = service.settings.model_copy(
        update={
            "openai_base_url": fake_model.base_url,
            "openai_api_key": "test-key",
            "model_endpoints": endpoints.model_endpoints,
        }
    )
    local = ThinkService(store=service.store, temporal=service.temporal, settings=settings)
    conv = local.conversation(Compactor, cid)
    assert await conv.compact() is None  # no conversation yet: nothing to compact
    question, answer = words("question", 400), words("answer", 400)
    await conv.add_messages(
        [
            UIMessage.user_text(question, id="q1"),
            UIMessage(id="r1", role="assistant", parts=[{"type": "text", "text": answer}]),
            UIMessage.user_text("the newest", id="q2"),
        ]
    )
    seen: list[events.ThinkEvent] = []
    unsubscribe = events.subscribe(seen.append, types="chat.context.compacted")
    try:
        fake_model.script(
            cid, reply(text("Q and A."), usage=Usage(input_tokens=300, output_tokens=4))
        )
        summary = await conv.compact()
    finally:
        unsubscribe()
    assert isinstance(summary, Compaction)
    assert (summary.first_message_id, summary.last_message_id) == ("q1", "r1")
    assert (summary.trigger, summary.turn_id, summary.summary) == ("manual", None, "Q and A.")
    assert summary.tokens_after < summary.tokens_before
    [event] = seen
    assert event.type == "chat.context.compacted" and event.trigger == "manual"

    # Through get_gateway outside any turn, and counted as the conversation's usage.
    headers = fake_model.requests(cid)[0]["headers"]
    assert (headers["x-think-asked-for"], headers["x-think-asked-trigger"]) == (
        "compaction",
        "manual",
    )
    usage = (await api.get(f"{BASE}/{cid}/usage")).json()
    assert (usage["turns"], usage["input_tokens"], usage["output_tokens"]) == (0, 300, 4)
    assert usage["models"] == ["priced/scripted-model"]
    assert usage["cost"] == pytest.approx(300 * 2e-6 + 4 * 8e-6)

    # Nothing new before the newest message: no model call, no second summary.
    assert await conv.compact() is None
    assert fake_model.calls(cid) == 1
    async with engine.connect() as db:
        rows = (
            await db.execute(
                sql(
                    "SELECT k.first_message_id, k.last_message_id FROM compactions k "
                    "JOIN conversations c ON c.uid = k.conversation_uid WHERE c.id = :cid"
                ),
                {"cid": cid},
            )
        ).all()
    assert [tuple(r) for r in rows] == [("q1", "r1")]

    # The worker's next turn reads the summary in their place.
    fake_model.script(cid, text("ok"))
    await wait_turn(api, "compactor", cid, "go on", status="completed")
    assert [m["content"] for m in sent(fake_model, cid, 1)[1:]] == [
        f"{SUMMARY_HEADER}\n\nQ and A.",
        "the newest",
        "go on",
    ]
    assert [text for _, text in await stored(api, cid)] == [
        question,
        answer,
        "the newest",
        "go on",
        "ok",
    ]


async def test_compact_without_a_compaction_function_is_refused(service: ThinkService) -> None:
    conv = service.conversation("helper", "no-compaction")
    with pytest.raises(UserError, match="on_compaction"):
        await conv.compact()


async def test_configure_session_runs_once_per_process(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, text("a"), text("b"), text("c"))
    for question in ("one", "two", "three"):
        await wait_turn(api, "compactor", cid, question, status="completed")
    lines = (stack.logs / "turn-hooks.log").read_text().splitlines()
    # Compactor's subclasses (tests/agents.py) log the hook too, each for its own class.
    hooks = [e for e in map(json.loads, lines) if e["hook"] == "configure_session"]
    calls = [e for e in hooks if e["agent"] == "compactor"]
    assert calls
    # Workers killed by other tests come back as new processes, each configuring once.
    assert set(Counter(e["pid"] for e in calls).values()) == {1}


def test_session_for_caches_the_configured_session() -> None:
    configured: list[Session] = []

    class Once(Think):
        def configure_session(self, session: Session) -> Session:
            configured.append(session)
            return session.compact_after(10)

    first, second = session_for(Once()), session_for(Once())
    assert first is second and configured == [first] and first.threshold == 10

    class Forgot(Think):
        def configure_session(self, session: Session) -> Session:
            session.compact_after(10)
            return None  # the mistake under test

    with pytest.raises(UserError, match="must return the session"):
        session_for(Forgot())


def test_the_session_builder_is_fluent_and_checks_its_input() -> None:
    def count(messages: Any) -> int:
        return 7

    fn = create_compact_function()
    session = Session().on_compaction(fn).compact_after(1_000).token_counter(count)
    assert (session.compaction, session.threshold, session.count_tokens) == (fn, 1_000, count)
    for bad in (0, -5, 1.5, True):
        with pytest.raises(UserError):
            Session().compact_after(bad)
    with pytest.raises(UserError):
        Session().on_compaction("summarise")
    with pytest.raises(UserError):
        create_compact_function(keep_recent_tokens=-1)


# -- the pieces, without the stack ----------------------------------------------------------


def message(id: str, role: str = "user", words: str = "") -> UIMessage:
    return UIMessage.model_validate(
        {"id": id, "role": role, "parts": [{"type": "text", "text": words or id}]}
    )


def summary(id: int, first: str, last: str, words: str = "s") -> Compaction:
    now = datetime.now(UTC)
    return Compaction(
        id=id,
        first_message_id=first,
        last_message_id=last,
        summary=words,
        tokens_before=100,
        tokens_after=1,
        trigger="manual",
        created_at=now,
    )


def ids(messages: list[UIMessage]) -> list[str]:
    return [m.id for m in messages]


def test_summaries_overlay_only_the_paths_they_lie_on() -> None:
    path = [message(i) for i in ("a", "b", "c", "d", "e")]
    assert apply_summaries(path, []) == path
    # A summary applies when its last message is on the path, from its first message on.
    assert ids(apply_summaries(path, [summary(1, "a", "c")])) == ["compaction-1", "d", "e"]
    assert ids(apply_summaries(path, [summary(1, "b", "c")])) == ["a", "compaction-1", "d", "e"]
    # Another branch's summary (its last message is elsewhere) does not.
    assert apply_summaries(path, [summary(1, "a", "x")]) == path
    # A newer summary that folds an older one in wins; on a tie, the newest.
    both = [summary(1, "a", "b"), summary(2, "a", "d")]
    assert ids(apply_summaries(path, both)) == ["compaction-2", "e"]
    tie = [summary(3, "a", "c", "old"), summary(4, "a", "c", "new")]
    [first, *_] = apply_summaries(path, tie)
    assert first.parts[0]["text"] == f"{SUMMARY_HEADER}\n\nnew"
    # Disjoint summaries both apply.
    apart = [summary(1, "a", "b"), summary(2, "c", "d")]
    assert ids(apply_summaries(path, apart)) == ["compaction-1", "compaction-2", "e"]
    # A path read from the middle (a hydration budget): the summary covers it from its start.
    assert ids(apply_summaries(path[2:], [summary(1, "a", "d")])) == ["compaction-1", "e"]
    [shown, _] = apply_summaries(path[2:], [summary(1, "a", "d")])
    assert shown.role == "user" and shown.metadata == {
        "compaction": {"id": 1, "first_message_id": "a", "last_message_id": "d"}
    }


def test_the_default_token_counter_is_four_characters_a_token() -> None:
    assert default_token_counter([]) == 0
    assert default_token_counter([{"role": "user", "content": "x" * 400}]) == 4 + 100
    assert default_token_counter([{"role": "user", "content": "x" * 401}]) == 4 + 101
    call = {"function": {"name": "add", "arguments": '{"a": 1}'}}  # 11 characters
    assert default_token_counter([{"role": "assistant", "tool_calls": [call]}]) == 4 + 3
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    assert default_token_counter([{"role": "user", "content": [image]}]) == 4 + 1_000


def context(messages: list[UIMessage]) -> CompactionContext:
    return CompactionContext(
        agent="a",
        conversation_id="c",
        trigger="manual",
        messages=messages,
        model=OfflineModel(),
        settings=Settings(),
        count_tokens=default_token_counter,
    )


async def test_the_ready_function_keeps_the_newest_tokens_and_summarises_the_rest() -> None:
    prompts: list[str] = []

    async def summarise(prompt: str) -> str:
        prompts.append(prompt)
        return "the gist"

    # Five messages of 4 + 25 tokens each.
    history = [message(f"m{i}", "user" if i % 2 else "assistant", "x" * 100) for i in range(5)]
    keep_two = create_compact_function(summarize=summarise, keep_recent_tokens=50)
    result = await keep_two(context(history))
    assert result == CompactionResult(
        first_message_id="m0", last_message_id="m2", summary="the gist"
    )
    assert prompts[0].count("x" * 100) == 3

    # An earlier summary is folded in: the new span starts where it starts.
    view = apply_summaries([history[0], *history[3:]], [summary(9, "m0", "m0", "old")])
    assert ids(view) == ["compaction-9", "m3", "m4"]
    everything = create_compact_function(summarize=summarise, keep_recent_tokens=0)
    result = await everything(context(view))
    assert result is not None and (result.first_message_id, result.last_message_id) == ("m0", "m3")
    assert "Earlier summary: old" in prompts[-1]

    # Nothing before the kept messages, or only the earlier summary: no model call at all.
    calls = len(prompts)
    assert await keep_two(context(history[:2])) is None
    assert await everything(context([view[0], history[4]])) is None
    assert await everything(context(history[:1])) is None
    assert len(prompts) == calls


async def test_the_ready_function_cuts_long_tool_outputs_from_its_prompt() -> None:
    prompts: list[str] = []
    tool_part = {
        "type": "tool-search",
        "toolCallId": "t1",
        "state": "output-available",
        "input": {"q": "x"},
        "output": "y" * 10_000,
    }
    history = [
        message("q"),
        UIMessage(id="r", role="assistant", parts=[{"type": "step-start"}, tool_part]),
        message("z"),
    ]
    fn = create_compact_function(summarize=prompts.append, keep_recent_tokens=0)
    await fn(context(history))
    assert (
        'Tool search({"q": "x"}) returned: ' + "y" * 2_000 + "… [8000 more characters]"
        in (prompts[0])
    )


def test_the_table_mirror_names_the_migrations_columns() -> None:
    assert [c.name for c in CompactionRow.__table__.columns] == [
        "id",
        "conversation_uid",
        "first_message_id",
        "last_message_id",
        "summary",
        "tokens_before",
        "tokens_after",
        "trigger",
        "turn_id",
        "created_at",
    ]


async def test_the_live_schema_matches_the_table_mirror(engine: AsyncEngine) -> None:
    async with engine.connect() as db:
        rows = (
            await db.execute(
                sql(
                    "SELECT column_name, is_nullable FROM information_schema.columns "
                    "WHERE table_name = 'compactions' ORDER BY ordinal_position"
                )
            )
        ).all()
    mirror = [(c.name, "YES" if c.nullable else "NO") for c in CompactionRow.__table__.columns]
    assert [tuple(r) for r in rows] == mirror
