"""Every example in docs/hooks.md runs, and does what the text around it says."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

import think
from think import (
    ChatErrorContext,
    ChatRecoveryContext,
    ChatResponseResult,
    StepContext,
    StepFinishContext,
    StepResult,
    ToolCallContext,
    TurnContext,
    events,
)
from think.agent._conversation_methods import bind_config
from think.sessions._context_blocks import SET_CONTEXT, read_block

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
IDS = {"agent": "a", "conversation_id": "c", "turn_id": "t"}


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def incr(self, *args: Any) -> None:
        self.calls.append(args)


def run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {name: getattr(think, name) for name in think.__all__}
    notified: list[Any] = []

    async def notify(*args: Any) -> None:
        notified.append(args)

    namespace.update(
        Any=Any,
        events=events,
        log=logging.getLogger("docs"),
        metrics=Recorder(),
        notify=notify,
        notified=notified,
    )
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace


def agent(namespace: dict[str, Any], name: str) -> Any:
    cls = namespace[name]
    assert issubclass(cls, think.Think)
    return cls()


def test_there_is_an_example_per_hook() -> None:
    text = DOC.read_text()
    hooks = [
        "before_turn",
        "before_step",
        "on_chunk",
        "on_step_finish",
        "before_tool_call",
        "on_chat_recovery",
        "classify_chat_error",
        "on_chat_error",
        "on_chat_response",
        "configure_session",
        "configure_context",
    ]
    for hook in hooks:
        assert f"def {hook}(" in text, hook
        assert hasattr(think.Think, hook)
    assert len(examples()) == len(hooks) + 1  # and one for events


def turn_context(**fields: Any) -> TurnContext:
    base = {"system": "Be brief.", "messages": [], "tools": [], "model": "m", **IDS}
    return TurnContext(**{**base, **fields})


async def test_examples_run() -> None:
    blocks: dict[str, str] = {}
    for block in examples():
        named = re.search(r"class (\w+)", block)
        blocks[named.group(1) if named else "events"] = block

    editor = agent(run(blocks["Editor"]), "Editor")
    config = editor.before_turn(turn_context(body={"file": "a.py"}))
    assert config.system == "Be brief.\nThe user is editing a.py."
    assert editor.before_turn(turn_context()) is None

    finisher = agent(run(blocks["Finisher"]), "Finisher")
    step = {"system": "s", "messages": [], "tools": ["x"], "model": "m", **IDS}
    assert finisher.before_step(StepContext(step=3, **step)).active_tools == []
    assert finisher.before_step(StepContext(step=0, **step)) is None

    counter = agent(run(blocks["Counter"]), "Counter")
    for chunk in ({"type": "text-delta", "id": "t", "delta": "a"}, {"type": "finish-step"}):
        counter.on_chunk(chunk)
    assert counter.deltas == 1

    meter = agent(run(blocks["Meter"]), "Meter")
    finished = StepFinishContext(**StepResult(step=1, input_tokens=3).model_dump(), **IDS)
    assert meter.on_step_finish(finished) is None

    read_only = agent(run(blocks["ReadOnly"]), "ReadOnly")
    blocked = read_only.before_tool_call(
        ToolCallContext(tool_call_id="x", tool_name="delete_file", **IDS)
    )
    assert blocked.action == "block" and blocked.reason == "this workspace is read-only"
    assert (
        read_only.before_tool_call(ToolCallContext(tool_call_id="x", tool_name="read", **IDS))
        is None
    )

    patient = agent(run(blocks["Patient"]), "Patient")
    recovery = {"step": 0, "failures": 1, "max_attempts": 3, "cause": "stalled", **IDS}
    assert patient.on_chat_recovery(ChatRecoveryContext(partial_text="x" * 300, **recovery)).persist
    assert not patient.on_chat_recovery(ChatRecoveryContext(partial_text="x", **recovery)).persist

    polite = agent(run(blocks["Polite"]), "Polite")
    facts = {"stage": "model", "user_message_persisted": True, "partial_message_persisted": False}
    overflow = ChatErrorContext(classification="context_overflow", **facts, **IDS)
    assert polite.on_chat_error(think.TurnFailed("too long"), overflow).startswith("This conver")
    other = ChatErrorContext(classification="fatal", **facts, **IDS)
    assert (
        polite.on_chat_error(think.TurnFailed("x"), other)
        == "Something went wrong. Please try again."
    )

    resilient = agent(run(blocks["Resilient"]), "Resilient")
    assert resilient.context_overflow.reactive and resilient.context_overflow.max_retries == 1
    gateway = think.ModelError("HTTP 400: the prompt has too many tokens", retryable=False)
    assert resilient.classify_chat_error(gateway, overflow) == "context_overflow"
    openai = "This model's maximum context length is 8192 tokens. However, your messages ..."
    assert resilient.classify_chat_error(openai, overflow) == "context_overflow"
    assert resilient.classify_chat_error("Rate limit reached", overflow) is None

    long_chats = agent(run(blocks["LongChats"]), "LongChats")
    session = long_chats.configure_session(think.Session())
    assert session.threshold == 60_000 and callable(session.compaction)

    concierge = agent(run(blocks["Concierge"]), "Concierge")
    soul, guest, plan = concierge.configure_context()
    assert await read_block(soul, {}) == "You are the hotel's concierge."
    assert guest.writable and guest.max_tokens == 500 and SET_CONTEXT in concierge.tools_by_name()
    assert plan.when_changed == "remind"
    assert await read_block(plan, {}) == "The guest's plan: basic."
    bind_config(concierge, {"plan": "gold"})
    assert await read_block(plan, {}) == "The guest's plan: gold."

    namespace = run(blocks["Notifier"])
    notifier = agent(namespace, "Notifier")
    await notifier.on_chat_response(
        ChatResponseResult(status="completed", message={"id": "m"}, **IDS)
    )
    await notifier.on_chat_response(ChatResponseResult(status="error", **IDS))
    assert namespace["notified"] == [("c", {"id": "m"})]

    namespace = run(blocks["events"])
    await events.emit(events.ChatTurnCancelled(reason="x", **IDS))
    await events.emit(events.ToolCalled(tool_name="t", tool_call_id="c", outcome="success", **IDS))
    assert namespace["metrics"].calls == [("chat.turn.cancelled",)]


@pytest.fixture(autouse=True)
def _isolated_bus(monkeypatch: pytest.MonkeyPatch) -> None:
    # The events example subscribes to the process-wide bus: give it a fresh one.
    monkeypatch.setattr(events, "bus", events.EventBus())
