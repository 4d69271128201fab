"""The event bus: filters, unsubscribe, isolation from handlers, the log line, the JSON shape."""

from __future__ import annotations

import asyncio
import logging
import time

import pydantic
import pytest

from think import events
from think.events import (
    EVENT_TYPES,
    ChatBudgetExhausted,
    ChatContextCompacted,
    ChatRecoveryAttempt,
    ChatRecoveryExhausted,
    ChatRequestFailed,
    ChatStreamStalled,
    ChatTurnCancelled,
    ChatTurnFinished,
    ChatTurnStarted,
    EventBus,
    ThinkEvent,
    ThinkEventTypeAdapter,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCalled,
    ToolFetched,
)
from think.exceptions import UserError
from think.models._base import Usage

IDS = {"agent": "helper", "conversation_id": "c-1", "turn_id": "turn_1"}


def samples() -> list[ThinkEvent]:
    """One event of every kind."""
    return [
        ChatRequestFailed(
            **IDS,
            step=0,
            attempt=1,
            error="HTTP 503",
            retryable=True,
            classification="transient",
        ),
        ChatRecoveryAttempt(**IDS, step=0, attempt=2, max_attempts=3, cause="stream stalled"),
        ChatRecoveryExhausted(**IDS, step=1, attempts=3, cause="HTTP 503"),
        ChatStreamStalled(**IDS, step=1, timeout=30.0),
        ChatBudgetExhausted(**IDS, which="tokens", used=10_500, limit=10_000),
        ChatTurnCancelled(**IDS, reason="user pressed stop"),
        ChatTurnFinished(
            **IDS,
            status="completed",
            finish_reason="stop",
            usage=Usage(input_tokens=12, output_tokens=3),
            duration_ms=842,
        ),
        ChatContextCompacted(**IDS, trigger="reactive", messages_before=80, summary_tokens=900),
        ToolCalled(
            **IDS, tool_name="get_weather", tool_call_id="call_1", outcome="success", duration_ms=5
        ),
        ToolFetched(
            **IDS,
            tool_name="fetch_url",
            tool_call_id="call_2",
            url="http://127.1/",
            ok=False,
            code="disallowed_url",
        ),
        ToolApprovalRequested(**IDS, approval_id="appr_1", tool_name="delete_repo"),
        ChatTurnStarted(**IDS, model="openai:gpt-5", queued_ms=12),
        ToolApprovalDecided(
            **IDS, approval_id="appr_1", tool_name="delete_repo", approved=False, by="http"
        ),
    ]


def tool_event(outcome: str = "success") -> ToolCalled:
    return ToolCalled.model_validate(
        {**IDS, "tool_name": "t", "tool_call_id": "call_1", "outcome": outcome}
    )


def test_every_event_type_has_a_sample() -> None:
    assert {e.type for e in samples()} == EVENT_TYPES
    assert len(EVENT_TYPES) == 13


@pytest.mark.parametrize("event", samples(), ids=lambda e: e.type)
def test_json_round_trip_through_the_type_adapter(event: ThinkEvent) -> None:
    back = ThinkEventTypeAdapter.validate_json(ThinkEventTypeAdapter.dump_json(event))
    assert back == event
    assert type(back) is type(event)
    assert back.timestamp.tzinfo is not None


def test_events_are_frozen() -> None:
    event = tool_event()
    with pytest.raises(pydantic.ValidationError):
        event.outcome = "error"  # type: ignore[misc]  # the point: frozen models refuse it


async def test_filters_by_exact_type_and_by_prefix() -> None:
    bus = EventBus()
    everything: list[str] = []
    tools: list[str] = []
    approvals: list[str] = []
    finished_or_cancelled: list[str] = []
    bus.subscribe(lambda e: everything.append(e.type))
    bus.subscribe(lambda e: tools.append(e.type), types="tool.")
    bus.subscribe(lambda e: approvals.append(e.type), types="tool.approval.")
    bus.subscribe(
        lambda e: finished_or_cancelled.append(e.type),
        types=["chat.turn.finished", "chat.turn.cancelled"],
    )
    for event in samples():
        await bus.emit(event)
    assert everything == [e.type for e in samples()]
    assert tools == [
        "tool.call",
        "tool.fetch",
        "tool.approval.requested",
        "tool.approval.decided",
    ]
    assert approvals == ["tool.approval.requested", "tool.approval.decided"]
    assert finished_or_cancelled == ["chat.turn.cancelled", "chat.turn.finished"]


@pytest.mark.parametrize("types", ["tool.cal", "tools.", "chat.turn.done", ["tool.call", "x."]])
def test_a_filter_that_matches_no_event_type_is_refused(types: str | list[str]) -> None:
    with pytest.raises(UserError, match="no event type matches"):
        EventBus().subscribe(lambda e: None, types=types)


async def test_unsubscribe() -> None:
    bus = EventBus()
    seen: list[str] = []

    def handler(event: ThinkEvent) -> None:
        seen.append(event.type)

    first = bus.subscribe(handler)
    bus.subscribe(handler, types="tool.")  # the same handler twice: two subscriptions
    await bus.emit(tool_event())
    assert seen == ["tool.call", "tool.call"]
    first()
    first()  # idempotent
    await bus.emit(tool_event())
    assert seen == ["tool.call"] * 3


async def test_handler_exceptions_are_logged_and_isolated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    reached: list[str] = []

    def broken(event: ThinkEvent) -> None:
        raise RuntimeError("sync handler bug")

    async def broken_async(event: ThinkEvent) -> None:
        raise RuntimeError("async handler bug")

    bus.subscribe(broken)
    bus.subscribe(broken_async)
    bus.subscribe(lambda e: reached.append(e.type))
    with caplog.at_level(logging.INFO, logger="think.events"):
        await bus.emit(tool_event())  # does not raise
    assert reached == ["tool.call"]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 2
    assert all("tool.call" in r.getMessage() for r in failures)
    assert {str(r.exc_info[1]) for r in failures if r.exc_info} == {
        "sync handler bug",
        "async handler bug",
    }


async def test_async_handlers_are_awaited() -> None:
    bus = EventBus()
    done: list[str] = []

    async def handler(event: ThinkEvent) -> None:
        await asyncio.sleep(0.01)
        done.append(event.type)

    bus.subscribe(handler)
    await bus.emit(tool_event())
    assert done == ["tool.call"]


async def test_a_slow_async_handler_is_bounded_but_not_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus(handler_timeout=0.05)
    done: list[str] = []

    async def slow(event: ThinkEvent) -> None:
        await asyncio.sleep(0.3)
        done.append(event.type)

    bus.subscribe(slow)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="think.events"):
        await bus.emit(tool_event())
    assert time.monotonic() - started < 0.25
    assert done == []
    assert any("still running" in r.getMessage() for r in caplog.records)
    async with asyncio.timeout(5):
        await bus.drain()
    assert done == ["tool.call"]


async def test_every_event_is_one_structured_log_line(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    emitted = samples()
    with caplog.at_level(logging.INFO, logger="think.events"):
        for event in emitted:
            await bus.emit(event)
    lines = [r for r in caplog.records if r.name == "think.events"]
    # The text names the event and its turn (issue 19: it was the type alone).
    assert [r.getMessage().split()[:4] for r in lines] == [
        [e.type, "agent=helper", "conversation=c-1", "turn=turn_1"] for e in emitted
    ]
    for record, event in zip(lines, emitted, strict=True):
        logged = record.event  # type: ignore[attr-defined]  # set through `extra`
        assert logged["type"] == event.type
        assert logged["agent"] == "helper"
        assert logged["conversation_id"] == "c-1"
        assert logged["turn_id"] == "turn_1"
        # What the log line carries reads back as the same event.
        assert ThinkEventTypeAdapter.validate_python(logged) == event
    levels = {r.getMessage().split()[0]: r.levelno for r in lines}
    assert levels["chat.request.failed"] == logging.WARNING
    assert levels["chat.recovery.exhausted"] == logging.WARNING
    assert levels["chat.stream.stalled"] == logging.WARNING
    assert levels["chat.budget.exhausted"] == logging.WARNING
    assert levels["chat.turn.finished"] == logging.INFO
    assert levels["tool.call"] == logging.INFO


async def test_a_failed_turn_logs_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="think.events"):
        await EventBus().emit(ChatTurnFinished(**IDS, status="interrupted"))
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


async def test_the_log_line_is_written_even_without_subscribers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="think.events"):
        await EventBus().emit(tool_event("denied"))
    assert caplog.records[0].event["outcome"] == "denied"  # type: ignore[attr-defined]


def test_emit_nowait_without_an_event_loop(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    sync_seen: list[str] = []

    async def async_handler(event: ThinkEvent) -> None:
        raise AssertionError("never runs: there is no loop to run it on")

    bus.subscribe(lambda e: sync_seen.append(e.type))
    bus.subscribe(async_handler)
    with caplog.at_level(logging.WARNING, logger="think.events"):
        bus.emit_nowait(tool_event())
    assert sync_seen == ["tool.call"]
    assert any("skipped" in r.getMessage() for r in caplog.records)


async def test_emit_nowait_inside_a_loop_schedules_async_handlers() -> None:
    bus = EventBus()
    done = asyncio.Event()

    async def handler(event: ThinkEvent) -> None:
        done.set()

    bus.subscribe(handler)
    bus.emit_nowait(tool_event())
    async with asyncio.timeout(5):
        await bus.drain()
    assert done.is_set()


async def test_the_process_wide_bus() -> None:
    seen: list[ThinkEvent] = []
    unsubscribe = events.subscribe(seen.append, types="chat.turn.")
    try:
        await events.emit(ChatTurnCancelled(**IDS))
        events.emit_nowait(tool_event())
    finally:
        unsubscribe()
    await events.emit(ChatTurnCancelled(**IDS))
    assert [e.type for e in seen] == ["chat.turn.cancelled"]
