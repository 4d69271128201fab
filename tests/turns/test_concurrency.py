"""`message_concurrency`: three overlapping submissions per mode, and the exact transcript and
statuses they leave; FIFO order under load; the per-request override, over HTTP too.

Turns overlap deterministically: the first answer streams slowly (scripted with a delay), and
the next submission is made only once its predecessor is seen streaming.
"""

from __future__ import annotations

import asyncio
import itertools
import os

import httpx
import pytest
from temporalio.client import Client

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._replay import HISTORIES, replayer
from tests._sse import chunks, read_stream
from tests._turn_helpers import SLOW, slow, streaming, transcript
from think import ConversationBusy, ThinkService
from think.testing import FakeOpenAIServer, text
from think.workflows.names import turn_workflow_id


async def test_queue_runs_every_submission_in_order(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, slow(), text("answer b"), text("answer c"))
    conv = service.conversation("helper", cid)
    a = await conv.submit_messages("a")
    await streaming(api, "helper", cid, a.turn_id)
    b = await conv.submit_messages("b")
    c = await conv.submit_messages("c")
    assert (b.status, c.status) == ("pending", "pending")
    assert (await conv.result(c.turn_id)).status == "completed"
    statuses = [(await conv.result(t.turn_id)).status for t in (a, b, c)]
    assert statuses == ["completed", "completed", "completed"]
    assert transcript(await conv.messages()) == [
        ("user", "a"),
        ("assistant", "".join(SLOW)),
        ("user", "b"),
        ("assistant", "answer b"),
        ("user", "c"),
        ("assistant", "answer c"),
    ]


async def test_latest_skips_the_overlapped_submissions(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The agent's own mode (`Latest.message_concurrency`): b never runs nor is appended."""
    fake_model.script(cid, slow(), text("answer c"))
    conv = service.conversation("latest", cid)
    a = await conv.submit_messages("a")
    await streaming(api, "latest", cid, a.turn_id)
    b = await conv.submit_messages("b")
    c = await conv.submit_messages("c")
    results = [await conv.result(t.turn_id) for t in (a, b, c)]
    assert [r.status for r in results] == ["completed", "skipped", "completed"]
    assert (
        results[1].error
        == f"skipped: superseded by turn {c.turn_id} (message_concurrency 'latest')"
    )
    assert results[1].message is None
    assert transcript(await conv.messages()) == [
        ("user", "a"),
        ("assistant", "".join(SLOW)),
        ("user", "c"),
        ("assistant", "answer c"),
    ]
    assert fake_model.calls(cid) == 2
    # The skipped turn's stream ends cleanly: why, then `abort` (no `start`, no message),
    # which an AI SDK client takes as a finished request with nothing to show.
    body, events = await read_stream(
        api, f"/v1/agents/latest/conversations/{cid}/turns/{b.turn_id}/stream"
    )
    assert [c["type"] for c in chunks(events)] == ["data-skipped", "abort"]
    assert events[-1].data == "[DONE]"
    if (NODE_DIR / "node_modules" / "ai").exists():
        rebuilt = await reconstruct(body)
        assert rebuilt["errors"] == [] and rebuilt["message"]["parts"] == []


async def test_drop_refuses_a_submission_while_a_turn_runs(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, slow())
    conv = service.conversation("helper", cid)
    a = await conv.submit_messages("a", concurrency="drop")
    await streaming(api, "helper", cid, a.turn_id)
    with pytest.raises(ConversationBusy) as refused:
        await conv.submit_messages("b", concurrency="drop")
    assert refused.value.turn_id == a.turn_id
    answer = await api.post(
        f"/v1/agents/helper/conversations/{cid}/turns",
        json={"input": "c", "concurrency": "drop"},
        headers={"Idempotency-Key": "c-1"},
    )
    assert answer.status_code == 409
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["status"] == 409 and problem["turn_id"] == a.turn_id
    assert "'drop'" in problem["detail"]
    assert (await conv.result(a.turn_id)).status == "completed"
    assert [s.turn_id for s in await conv.list_submissions()] == [a.turn_id]  # nothing stored
    assert transcript(await conv.messages()) == [("user", "a"), ("assistant", "".join(SLOW))]
    # Idle again: the same request is accepted now.
    again = await conv.submit_messages("d", concurrency="drop")
    assert again.accepted and (await conv.result(again.turn_id)).status == "completed"


async def test_merge_answers_the_overlapped_submissions_in_one_turn(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, slow(), text("answer b and c"))
    conv = service.conversation("helper", cid)
    a = await conv.submit_messages("a", concurrency="merge")
    await streaming(api, "helper", cid, a.turn_id)
    b = await conv.submit_messages("b", concurrency="merge")
    c = await conv.submit_messages("c", concurrency="merge")
    results = [await conv.result(t.turn_id) for t in (a, b, c)]
    assert [r.status for r in results] == ["completed", "completed", "skipped"]
    assert results[2].answered_by == b.turn_id
    assert results[1].message is not None
    assert transcript(await conv.messages()) == [
        ("user", "a"),
        ("assistant", "".join(SLOW)),
        ("user", "b"),
        ("user", "c"),
        ("assistant", "answer b and c"),
    ]
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert [m["content"] for m in second[-2:]] == ["b", "c"]
    assert fake_model.calls(cid) == 2
    turn = (await api.get(f"/v1/agents/helper/conversations/{cid}/turns/{c.turn_id}")).json()
    assert turn["status"] == "skipped" and turn["answered_by"] == b.turn_id


async def test_debounce_waits_for_quiet_then_answers_everything_once(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`Debouncer`: 1.5 s of quiet; three quick submissions make one turn."""
    fake_model.script(cid, text("one answer"))
    conv = service.conversation("debouncer", cid)
    a = await conv.submit_messages("a")
    b = await conv.submit_messages("b")
    c = await conv.submit_messages("c")
    results = [await conv.result(t.turn_id) for t in (a, b, c)]
    assert [r.status for r in results] == ["completed", "skipped", "skipped"]
    assert [r.answered_by for r in results] == [None, a.turn_id, a.turn_id]
    assert transcript(await conv.messages()) == [
        ("user", "a"),
        ("user", "b"),
        ("user", "c"),
        ("assistant", "one answer"),
    ]
    assert fake_model.calls(cid) == 1
    first = await conv.get_submission(a.turn_id)
    assert first is not None and first.started_at is not None
    # The turn started only after the quiet period that followed the last submission.
    last = await conv.get_submission(c.turn_id)
    assert last is not None
    assert (first.started_at - last.created_at).total_seconds() >= 1.4


async def test_interrupt_cancels_the_running_turn_and_keeps_its_partial(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, slow(), slow(), text("answer c"))
    conv = service.conversation("helper", cid)
    a = await conv.submit_messages("a", concurrency="interrupt")
    await streaming(api, "helper", cid, a.turn_id)
    b = await conv.submit_messages("b", concurrency="interrupt")
    await streaming(api, "helper", cid, b.turn_id)
    c = await conv.submit_messages("c", concurrency="interrupt")
    results = [await conv.result(t.turn_id) for t in (a, b, c)]
    assert [r.status for r in results] == ["aborted", "aborted", "completed"]
    assert results[0].error == f"interrupted by turn {b.turn_id}"
    assert results[1].error == f"interrupted by turn {c.turn_id}"
    got = transcript(await conv.messages())
    assert [role for role, _ in got] == ["user", "assistant"] * 3
    assert [t for _, t in got][::2] == ["a", "b", "c"]
    for partial in (got[1][1], got[3][1]):
        assert partial and "".join(SLOW).startswith(partial) and partial != "".join(SLOW)
    assert got[5] == ("assistant", "answer c")


async def test_rollback_branches_from_where_the_cancelled_turn_started(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("answer x"), slow(), slow(), text("answer c"))
    conv = service.conversation("helper", cid)
    x = await conv.save_messages("x")
    assert x.status == "completed" and x.message is not None
    a = await conv.submit_messages("a", concurrency="rollback")
    await streaming(api, "helper", cid, a.turn_id)
    b = await conv.submit_messages("b", concurrency="rollback")
    await streaming(api, "helper", cid, b.turn_id)
    c = await conv.submit_messages("c", concurrency="rollback")
    results = [await conv.result(t.turn_id) for t in (a, b, c)]
    assert [r.status for r in results] == ["aborted", "aborted", "completed"]
    assert results[1].error == f"rolled back by turn {c.turn_id}"
    # The active path skips the abandoned exchanges...
    assert transcript(await conv.messages()) == [
        ("user", "x"),
        ("assistant", "answer x"),
        ("user", "c"),
        ("assistant", "answer c"),
    ]
    # ...which stay in the tree, each a branch from x's answer.
    base = f"/v1/agents/helper/conversations/{cid}/messages"
    for abandoned, user in ((results[0], "a"), (results[1], "b")):
        assert abandoned.message is not None
        path = (await api.get(base, params={"leaf_id": abandoned.message.id})).json()["messages"]
        assert [m["role"] for m in path] == ["user", "assistant", "user", "assistant"]
        assert path[1]["id"] == x.message.id and path[2]["parts"][0]["text"] == user


async def test_fifo_under_twenty_concurrent_submissions(service: ThinkService, cid: str) -> None:
    conv = service.conversation("helper", cid)
    words = [f"q{i}" for i in range(20)]
    submitted = await asyncio.gather(*(conv.submit_messages(w) for w in words))
    assert all(s.accepted for s in submitted)
    results = await asyncio.gather(*(conv.result(s.turn_id) for s in submitted))
    assert {r.status for r in results} == {"completed"}
    got = transcript(await conv.messages())
    assert len(got) == 40
    # Each question is followed by its own answer: one turn at a time...
    for (role_q, q), (role_a, answer) in zip(got[::2], got[1::2], strict=True):
        assert (role_q, role_a) == ("user", "assistant") and answer == f"echo: {q}"
    assert sorted(q for _, q in got[::2]) == sorted(words)
    # ...in the order they were accepted: each starts after the one before it ended.
    records = sorted(
        [r for r in [await conv.get_submission(s.turn_id) for s in submitted] if r],
        key=lambda r: r.started_at or r.created_at,
    )
    for before, after in itertools.pairwise(records):
        assert before.completed_at is not None and after.started_at is not None
        assert before.completed_at <= after.started_at


async def test_a_request_overrides_the_agents_mode(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`latest` agent, "queue" for these submissions: all three run. Over HTTP the reverse:
    the `helper` (queue) with `"concurrency": "latest"` skips the overlapped one."""
    fake_model.script(cid, slow(), text("answer b"), text("answer c"))
    conv = service.conversation("latest", cid)
    a = await conv.submit_messages("a", concurrency="queue")
    await streaming(api, "latest", cid, a.turn_id)
    b = await conv.submit_messages("b", concurrency="queue")
    c = await conv.submit_messages("c", concurrency="queue")
    assert [(await conv.result(t.turn_id)).status for t in (a, b, c)] == ["completed"] * 3

    other = f"{cid}-http"
    fake_model.script(other, slow(), text("answer 3"))
    base = f"/v1/agents/helper/conversations/{other}/turns"
    first = (await api.post(base, json={"input": "1"})).json()
    await streaming(api, "helper", other, first["turn_id"])
    second = (await api.post(base, json={"input": "2", "concurrency": "latest"})).json()
    third = await api.post(base, json={"input": "3", "concurrency": "latest", "mode": "wait"})
    assert third.status_code == 200 and third.json()["status"] == "completed"
    skipped = (await api.get(f"{base}/{second['turn_id']}")).json()
    assert skipped["status"] == "skipped"
    assert skipped["error"].startswith(f"skipped: superseded by turn {third.json()['turn_id']}")
    bad = await api.post(base, json={"input": "4", "concurrency": "sometimes"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "concurrency"


async def test_concurrency_histories_replay(
    service: ThinkService,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """A conversation that interrupts, merges, continues and debounces replays in the sandbox
    (which rejects nondeterministic calls); with THINK_RECORD_HISTORIES=1 it is recorded as
    `tests/histories/conversation-concurrency.json`, for the committed-history replay test."""
    fake_model.script(cid, slow(), slow(), text("c and d"), text("more"), text("debounced"))
    conv = service.conversation("helper", cid)
    a = await conv.submit_messages("a")
    await streaming(api, "helper", cid, a.turn_id)
    b = await conv.submit_messages("b", concurrency="interrupt")
    await streaming(api, "helper", cid, b.turn_id)
    c = await conv.submit_messages("c", concurrency="merge")
    d = await conv.submit_messages("d", concurrency="merge")
    results = [await conv.result(t.turn_id) for t in (a, b, c, d)]
    assert [r.status for r in results] == ["aborted", "completed", "completed", "skipped"]
    assert (await conv.continue_last_turn()).status == "completed"
    debounced = await conv.save_messages("e", concurrency="debounce")
    assert debounced.status == "completed"
    # The interrupted turn (cancelled mid-step) and the debounced one (durable timers first).
    for name, turn_id in (("interrupted-turn", a.turn_id), ("debounce-turn", debounced.turn_id)):
        handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn_id))
        await handle.result()
        history = await handle.fetch_history()
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
        path = HISTORIES / f"{name}.json"
        if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
            path.write_text(history.to_json())
