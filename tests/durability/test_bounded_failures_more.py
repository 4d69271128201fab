"""One rule for failure (issue 31), for the activities that
`tests/durability/test_bounded_failures.py` does not strike: an agent tool's call (admitting
the sub-agent's turn, recording its answer), cancelling sub-agents as their parent's turn
ends, and what runs after a turn
(`on_chat_response`, compaction). Each is given a real failure that is not transient and must
be tried a bounded number of times, the client told only the safe message, and the
conversation's next turn run. Before the rule, all but compaction were retried for ever.

The failures: a Postgres trigger (`tests._failures.refused`) refusing this test's own rows
with `P0001` (a bug's failure: psycopg's `InternalError`, neither data nor transient), or a
test agent that cannot be made inside the activity (`tests.agents._breaks_in`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, WorkflowFailureError

from tests._failures import (
    ENDS_WITHIN,
    REFUSAL,
    attempts,
    ends_in_error,
    next_turn_completes,
    refused,
    url,
    workflow_attempts,
)
from tests._sse import chunks, deltas, read_stream, read_until
from tests._turn_helpers import tool_part, until_status
from tests.agents import OVERRIDE_SECRET
from think.testing import FakeOpenAIServer, reply, stall, text, tool_call
from think.workflows.names import (
    AGENT_TOOL_FINISH_ACTIVITY,
    AGENT_TOOL_START_ACTIVITY,
    CANCEL_CHILDREN_ACTIVITY,
    CHAT_RESPONSE_ACTIVITY,
    COMPACT_ACTIVITY,
    turn_workflow_id,
)


def child_of(cid: str) -> str:
    """`lead`'s child conversation for its `research` tool (tests/turns/test_sub_agents.py)."""
    return f"lead.{cid}.research"


async def child_turns(api: httpx.AsyncClient, child: str) -> list[dict[str, Any]]:
    found = await api.get(url("researcher", child))
    if found.status_code == 404:
        return []
    assert found.status_code == 200, found.text
    turns: list[dict[str, Any]] = found.json()["turns"]
    return turns


async def test_a_sub_agent_turn_postgres_refuses_to_admit_ends_the_parent_turn(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """The agent tool's start cannot store the child's turn: tried three times, then the
    parent's turn ends `error` with its tool call kept, and no child turn exists."""
    word = f"poison{uuid.uuid4().hex}"
    call_id = f"call_{uuid.uuid4().hex}"
    fake_model.script(cid, tool_call("research", {"input": f"find {word}"}, id=call_id))
    condition = f"strpos(NEW.request::text, '{word}') > 0"
    async with refused(engine, "turns", condition, errcode="P0001", event="INSERT"):
        turn, _ = await ends_in_error(api, "lead", cid)
        found = await attempts(temporal, "lead", cid, turn["turn_id"], AGENT_TOOL_START_ACTIVITY)
        assert found == [3]
    assert tool_part(turn, call_id)["state"] == "input-available"  # the partial kept
    assert await child_turns(api, child_of(cid)) == []
    assert fake_model.calls(cid) == 1
    await next_turn_completes(api, "lead", cid)


async def test_a_sub_agent_answer_postgres_refuses_to_record_ends_the_parent_turn(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """The child answered, but the agent tool's finish cannot record its answer in the
    parent's stream: tried three times, then the parent's turn ends `error`; the child's
    turn stays `completed`."""
    call_id = f"call_{uuid.uuid4().hex}"
    fake_model.script(cid, tool_call("research", {"input": "dig"}, id=call_id))
    fake_model.script(child_of(cid), text("Finding: 42."))
    condition = (
        f"NEW.chunk->>'type' = 'tool-output-available' AND NEW.chunk->>'toolCallId' = "
        f"'{call_id}' AND coalesce(NEW.chunk->>'preliminary', 'false') <> 'true'"
    )
    async with refused(engine, "stream_chunks", condition, errcode="P0001"):
        turn, streamed = await ends_in_error(api, "lead", cid)
        found = await attempts(temporal, "lead", cid, turn["turn_id"], AGENT_TOOL_FINISH_ACTIVITY)
        assert found == [3]
    assert tool_part(turn, call_id)["state"] == "input-available"
    assert not [
        c for c in streamed if c["type"] == "tool-output-available" and not c.get("preliminary")
    ]
    [child] = await child_turns(api, child_of(cid))
    assert child["status"] == "completed"
    assert fake_model.calls(cid) == 1
    await next_turn_completes(api, "lead", cid)


async def test_sub_agents_postgres_refuses_to_cancel_leave_the_parent_to_end(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """A parent turn cancelled while its sub-agent runs cannot note the child's cancel:
    tried three times, then left (logged); the parent's turn ends `aborted` all the same
    while the child's still runs (to its own end: here, cancelled by hand), and the parent's
    conversation goes on. Before, the parent retried the cancel until the child ended."""
    call_id = f"call_{uuid.uuid4().hex}"
    fake_model.script(cid, tool_call("research", {"input": "long"}, id=call_id))
    fake_model.script(child_of(cid), text("starting ") + stall(60))
    response = await api.post(url("lead", cid), json={"input": "go"})
    assert response.status_code == 202, response.text
    parent = response.json()

    def delegated(got: list[dict[str, Any]]) -> bool:
        return any(c.get("toolCallId") == call_id and c.get("preliminary") for c in got)

    await asyncio.wait_for(read_until(api, parent["stream_url"], delegated), ENDS_WITHIN)
    for _ in range(100):
        running = [t for t in await child_turns(api, child_of(cid)) if t["status"] == "running"]
        if running:
            break
        await asyncio.sleep(0.1)
    [child] = running
    # Begun: a child whose step has not claimed its turn yet would be aborted by the cancel
    # right there (nothing to refuse), not told to stop.
    child_url = f"{url('researcher', child_of(cid))}/{child['turn_id']}"
    await asyncio.wait_for(read_until(api, f"{child_url}/stream", deltas(1)), ENDS_WITHIN)
    condition = (
        f"NEW.id = '{child['turn_id']}' AND NEW.completed_at IS NULL "
        "AND NEW.error IS DISTINCT FROM OLD.error"
    )
    async with refused(engine, "turns", condition, errcode="P0001"):
        cancel = await api.post(f"{parent['status_url']}/cancel", json={"reason": "user left"})
        assert cancel.status_code == 202, cancel.text
        ended = await until_status(api, parent["status_url"], {"aborted"}, within=ENDS_WITHIN)
        assert ended["status"] == "aborted", ended
        found = await attempts(temporal, "lead", cid, parent["turn_id"], CANCEL_CHILDREN_ACTIVITY)
        assert found == [3]
    assert REFUSAL not in json.dumps(ended)
    assert (await api.get(child_url)).json()["status"] == "running"
    cancel = await api.post(f"{child_url}/cancel", json={"reason": "the test is over"})
    assert cancel.status_code == 202, cancel.text
    child_ended = await until_status(api, child_url, {"aborted"}, within=ENDS_WITHIN)
    assert child_ended["status"] == "aborted", child_ended
    await next_turn_completes(api, "lead", cid)


async def after_turn_fails(
    api: httpx.AsyncClient, temporal: Client, agent: str, cid: str, kind: str
) -> None:
    """A turn of `agent` that completes, then its after-turn `kind` activity, which must fail
    for good within `ENDS_WITHIN` s after three attempts, telling nobody the agent's secret
    (not even the Temporal UI), and leave the turn as it ended."""
    first = await next_turn_completes(api, agent, cid)
    turn_workflow = turn_workflow_id(agent, cid, first["turn_id"])
    # The after-turn workflow is started as the turn's workflow ends.
    await asyncio.wait_for(temporal.get_workflow_handle(turn_workflow).result(), ENDS_WITHIN)
    after = temporal.get_workflow_handle(f"after-{turn_workflow}")
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(after.result(), ENDS_WITHIN)
    found = await workflow_attempts(temporal, f"after-{turn_workflow}", kind)
    causes, cause = [], failed.value.cause
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__
    assert found == [3], causes
    assert OVERRIDE_SECRET not in " ".join(causes)
    # The turn is as it ended.
    record = (await api.get(f"{url(agent, cid)}/{first['turn_id']}")).json()
    assert record["status"] == "completed" and record["error"] is None, record


async def test_an_on_chat_response_that_cannot_run_is_given_up_after_three_attempts(
    api: httpx.AsyncClient, temporal: Client, cid: str
) -> None:
    """`on_chat_response`'s activity fails (the agent cannot be made there): tried three
    times, not for ever; the turn stays `completed` and the next one runs."""
    await after_turn_fails(api, temporal, "unresponsive", cid, CHAT_RESPONSE_ACTIVITY)
    await next_turn_completes(api, "unresponsive", cid)


async def test_a_compaction_that_cannot_run_is_given_up_after_three_attempts(
    api: httpx.AsyncClient, temporal: Client, cid: str
) -> None:
    """The compaction after a turn fails (the agent cannot be made there): tried three times,
    as every activity's failure that is not transient (before, five, for 15 s); the turn
    stays `completed` and the next one runs."""
    await after_turn_fails(api, temporal, "uncompacted", cid, COMPACT_ACTIVITY)
    await next_turn_completes(api, "uncompacted", cid)


async def test_an_answer_whose_record_fails_transiently_is_stored_by_the_attempt_holding_it(
    api: httpx.AsyncClient, engine: AsyncEngine, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Postgres refuses the answer's record for a while with a serialization failure (what a
    deadlock or a restart looks like to the step): the attempt that holds the answer tries
    again until it goes through. The model is asked once, the stream carries no reset and no
    recovery, and the answer is stored once. Before, the attempt failed, and the one replacing
    it found the words streamed but not recorded and asked the model again."""
    words = [f"w{i} " for i in range(8)]
    fake_model.script(cid, reply(text(*words), delay=0.1))
    response = await api.post(url("helper", cid), json={"input": "go"})
    assert response.status_code == 202, response.text
    turn = response.json()
    condition = f"NEW.id = '{turn['turn_id']}' AND NEW.completed_at IS NOT NULL"
    async with refused(engine, "turns", condition, errcode="40001"):
        await asyncio.wait_for(read_until(api, turn["stream_url"], deltas(len(words))), ENDS_WITHIN)
        await asyncio.sleep(1.0)  # the record is refused, and tried again, meanwhile
        held = (await api.get(turn["status_url"])).json()
        assert held["status"] == "running", held
    ended = await until_status(api, turn["status_url"], {"completed"}, within=ENDS_WITHIN)
    assert "".join(p["text"] for p in ended["message"]["parts"] if p["type"] == "text") == (
        "".join(words)
    )
    assert fake_model.calls(cid) == 1
    _, events = await read_stream(api, turn["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    assert "reset-step" not in kinds and "data-recovering" not in kinds, kinds
    assert kinds.count("text-delta") == len(words)
