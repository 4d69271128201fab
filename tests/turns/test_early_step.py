"""A gateway's turn has its first step begun by the worker that starts its workflow, beside
the start (`think.engine.activities.EarlySteps`): the step takes it on, with the model's answer
already on its way. Proven on the real stack (the hook says where it ran) and, for what a
real stack cannot force (a request given up while on its way), on the pieces themselves."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from tests._logs import hook_calls
from tests._stack import Stack
from tests._turn_helpers import wait_turn
from think.engine.activities._eager_first_step import _given_up
from think.engine.activities._model_step import EarlyStep
from think.engine.activities._model_stream import CancelSubscription, PreparedStep, SentRequest
from think.models import Finish, ModelEvent, TextDelta
from think.testing import FakeOpenAIServer, text


async def test_the_first_step_runs_its_hooks_beside_the_start_once(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, text("Hello there."))
    turn = await wait_turn(api, "introspective", cid, status="completed")
    assert turn["message"]["parts"][-1]["text"] == "Hello there."
    # Once, outside any activity (beside the workflow's start), with its turn bound.
    [call] = await hook_calls(stack, cid, "before_turn")
    assert call["in_activity"] is False
    assert call["found"] == cid
    assert fake_model.calls(cid) == 1  # the request sent early was the step's own


async def test_a_hook_that_needs_its_activity_gets_it(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    """A hook that fails beside the start (here: it asks for its activity) is not reported:
    the step does it all again in its activity, where the hook works."""
    fake_model.script(cid, text("Fine."))
    body = {"needs_activity": True}
    turn = await wait_turn(api, "introspective", cid, body=body, status="completed")
    assert turn["message"]["parts"][-1]["text"] == "Fine."
    calls = await hook_calls(stack, cid, "before_turn", at_least=2)
    assert [c["in_activity"] for c in calls] == [False, True]
    [attempt] = await hook_calls(stack, cid, "before_turn_attempt")
    assert attempt["attempt"] == 1
    assert fake_model.calls(cid) == 1  # the early one failed before its request


async def test_turned_off_the_first_step_runs_all_in_its_activity(
    stack: Stack, fake_model: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory, cid: str
) -> None:
    """`THINK_EARLY_FIRST_STEP=0`: a worker (of a task queue of its own, with its gateway)
    starts the turn without beginning its step, which then runs its hooks in its activity."""
    logs = tmp_path_factory.mktemp("early-off")
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": f"early-off-{secrets.token_hex(4)}",
        "THINK_EARLY_FIRST_STEP": "0",
        "THINK_HOME": str(logs),
    }
    own = Stack(env=env, logs=logs)
    try:
        own.wait_polling(own.start_worker())
        own.start_api()
        fake_model.script(cid, text("Slower, the same."))
        async with httpx.AsyncClient(base_url=own.api_url, timeout=60) as api:
            turn = await wait_turn(api, "introspective", cid, status="completed")
        assert turn["message"]["parts"][-1]["text"] == "Slower, the same."
        [call] = await hook_calls(own, cid, "before_turn")
        assert call["in_activity"] is True and call["found"] == cid
        assert fake_model.calls(cid) == 1
    finally:
        own.stop()


class _Stream:
    """A model stream that records what happened to it."""

    def __init__(self, events: list[ModelEvent], *, block_first: bool = False) -> None:
        self.events = events
        self.started = asyncio.Event()
        self.closed = False
        self.block_first = block_first

    async def run(self) -> AsyncIterator[ModelEvent]:
        self.started.set()
        try:
            if self.block_first:
                await asyncio.Event().wait()  # a model that has not answered yet
            for event in self.events:
                yield event
        finally:
            self.closed = True


async def test_a_sent_request_is_on_its_way_before_its_first_read() -> None:
    stream = _Stream([TextDelta(delta="a"), TextDelta(delta="b"), Finish()])
    sent = SentRequest(stream.run())
    await asyncio.wait_for(stream.started.wait(), 1)  # nobody has read yet
    assert [e async for e in sent] == stream.events
    await sent.aclose()
    assert stream.closed


async def test_a_sent_request_that_answers_nothing_ends() -> None:
    stream = _Stream([])
    sent = SentRequest(stream.run())
    assert [e async for e in sent] == []


async def test_a_sent_request_given_up_on_its_way_is_cut_off() -> None:
    stream = _Stream([TextDelta(delta="never")], block_first=True)
    sent = SentRequest(stream.run())
    await asyncio.wait_for(stream.started.wait(), 1)
    await asyncio.wait_for(sent.aclose(), 1)  # no "generator is already running"
    assert stream.closed


async def test_a_reader_cancelled_while_it_waits_for_the_first_event_leaves_it_closable() -> None:
    stream = _Stream([TextDelta(delta="never")], block_first=True)
    sent = SentRequest(stream.run())
    reader = asyncio.create_task(anext(sent))
    await asyncio.wait_for(stream.started.wait(), 1)
    reader.cancel()
    await asyncio.wait([reader])
    await asyncio.wait_for(sent.aclose(), 1)
    assert stream.closed


async def test_a_failed_first_event_reaches_the_reader() -> None:
    async def failing() -> AsyncIterator[ModelEvent]:
        raise RuntimeError("model down")
        yield Finish()  # pragma: no cover - makes this a generator

    sent = SentRequest(failing())
    try:
        await anext(sent)
    except RuntimeError as exc:
        assert str(exc) == "model down"
    else:
        raise AssertionError("the failure did not reach the reader")


def _early(events: AsyncIterator[ModelEvent]) -> EarlyStep:
    """An early step holding `events`; what else it holds plays no part in giving it up."""
    unused = cast(Any, None)
    prepared = PreparedStep(unused, unused, unused, None, events, 0.0)
    no_listener = cast(Any, SimpleNamespace(cancels=None))
    return EarlyStep(unused, unused, [], prepared, CancelSubscription(no_listener, "t"))


async def test_an_early_step_given_up_cuts_its_request_off() -> None:
    stream = _Stream([TextDelta(delta="never")], block_first=True)
    sent = SentRequest(stream.run())

    async def begun() -> EarlyStep | None:
        return _early(sent)

    task = asyncio.create_task(begun())
    await asyncio.wait([task])
    await asyncio.wait_for(stream.started.wait(), 1)
    await asyncio.wait_for(_given_up(task), 1)
    assert stream.closed


async def test_an_early_step_given_up_before_its_request_sends_none() -> None:
    sent_any = asyncio.Event()

    async def begun() -> EarlyStep | None:
        await asyncio.Event().wait()  # still reading the turn when it is given up
        sent_any.set()
        return None

    task = asyncio.create_task(begun())
    await asyncio.sleep(0)
    await asyncio.wait_for(_given_up(task), 1)
    assert task.cancelled() and not sent_any.is_set()
