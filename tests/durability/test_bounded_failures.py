"""One rule for failure (issue 31): a failure that is not transient ends the turn `error`
after a bounded number of attempts, whatever activity it strikes, and the conversation goes
on. Before, anything but a model error was retried like an outage, for ever: each retry called
the model or ran the tool again, the turn stayed `running` and every later turn `pending`.

The failures are real: a Postgres trigger, created here and dropped after, refuses the writes
of this test's own turn only (matched on a word only its scripted model says, or on its
tool call's id), as Postgres refuses a NUL in `jsonb` (`22P05`) or as a bug would fail
(`P0001`, which psycopg raises as an `InternalError`: not data, not transient)."""

from __future__ import annotations

import json
import uuid

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client

from tests._failures import attempts, ends_in_error, next_turn_completes, refused
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import COMMIT_ACTIVITY, MODEL_STEP_ACTIVITY, TOOL_CALL_ACTIVITY


async def test_model_output_postgres_refuses_ends_the_turn_after_one_call(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """A data error (class 22) is refused again for the same data: one model call, no
    retry; the step that could not be stored is reset for clients, as in the stored
    message."""
    word = f"poison{uuid.uuid4().hex}"
    fake_model.script(cid, text("Hello ", f"{word} ", "world"))
    condition = f"strpos(NEW.chunk::text, '{word}') > 0"
    async with refused(engine, "stream_chunks", condition):
        turn, streamed = await ends_in_error(api, "helper", cid)
        assert fake_model.calls(cid) == 1
        assert await attempts(temporal, "helper", cid, turn["turn_id"], MODEL_STEP_ACTIVITY) == [1]
    assert word not in json.dumps(turn["message"])
    kinds = [c["type"] for c in streamed]
    if "start-step" in kinds:  # what the stream opened is closed for clients
        assert "reset-step" in kinds or "text-end" in kinds, kinds
    await next_turn_completes(api, "helper", cid)
    assert fake_model.calls(cid) == 2


async def test_an_unexpected_failure_in_a_model_step_is_tried_three_times(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """A failure that is neither transient nor a model error (here an `InternalError`, as a
    bug or an adapter's `ValidationError` would be) gets `NON_TRANSIENT_ATTEMPTS` attempts."""
    word = f"poison{uuid.uuid4().hex}"
    for _ in range(3):
        fake_model.script(cid, text("Hello ", f"{word} ", "world"))
    condition = f"strpos(NEW.chunk::text, '{word}') > 0"
    async with refused(engine, "stream_chunks", condition, errcode="P0001"):
        turn, _ = await ends_in_error(api, "helper", cid)
        assert fake_model.calls(cid) == 3
        assert await attempts(temporal, "helper", cid, turn["turn_id"], MODEL_STEP_ACTIVITY) == [3]
    await next_turn_completes(api, "helper", cid)
    assert fake_model.calls(cid) == 4


async def test_a_tool_output_postgres_refuses_ends_the_turn_after_one_run(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """The tool's output cannot be stored: the tool ran once, the model is not asked again,
    and the turn keeps its draft (the step that called the tool)."""
    call_id = f"call_{uuid.uuid4().hex}"
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}, id=call_id))
    condition = (
        f"NEW.chunk->>'type' = 'tool-output-available' AND NEW.chunk->>'toolCallId' = '{call_id}'"
    )
    async with refused(engine, "stream_chunks", condition):
        turn, streamed = await ends_in_error(api, "helper", cid)
        assert await attempts(temporal, "helper", cid, turn["turn_id"], TOOL_CALL_ACTIVITY) == [1]
    assert fake_model.calls(cid) == 1
    assert not any(c["type"] == "tool-output-available" for c in streamed)
    [part] = [p for p in turn["message"]["parts"] if p.get("toolCallId") == call_id]
    assert part["state"] == "input-available"  # the partial answer kept
    await next_turn_completes(api, "helper", cid)


async def test_an_end_postgres_refuses_is_stored_plainly(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    fake_model: FakeOpenAIServer,
    temporal: Client,
    cid: str,
) -> None:
    """The commit that ends a turn whose step budget is spent (`max_steps` 1) cannot store
    `completed`: it ends the turn `error` plainly, with its draft, at the first attempt."""
    call_id = f"call_{uuid.uuid4().hex}"
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}, id=call_id))
    condition = f"NEW.status = 'completed' AND strpos(NEW.message::text, '{call_id}') > 0"
    async with refused(engine, "turns", condition):
        turn, _ = await ends_in_error(api, "hooks", cid, {"body": {"max_steps": 1}})
        assert await attempts(temporal, "hooks", cid, turn["turn_id"], COMMIT_ACTIVITY) == [1]
    [part] = [p for p in turn["message"]["parts"] if p.get("toolCallId") == call_id]
    assert part["state"] == "output-available" and part["output"] == 3
    assert fake_model.calls(cid) == 1
    await next_turn_completes(api, "hooks", cid)
