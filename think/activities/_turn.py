"""The activities of a turn: prepare, model step, tool call, commit.

This is where the I/O and the user's code run. Each activity is idempotent: it reads the turn
row under a lock, skips work a previous attempt already recorded, and writes its outcome and its
stream chunks in one transaction.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import text
from temporalio import activity
from temporalio.exceptions import ApplicationError

from think._agent import Think
from think._registry import AgentRegistry
from think._settings import Settings
from think._transcript import to_chat_messages
from think.activities._heartbeat import heartbeating
from think.exceptions import (
    NON_RETRYABLE_MODEL_ERROR,
    NON_RETRYABLE_USER_ERROR,
    STALE_ATTEMPT,
    ModelError,
    ToolError,
    UserError,
)
from think.models import (
    Finish,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    resolve_model,
)
from think.storage import Store
from think.streaming import ChunkWriter, Fence, StaleAttempt, append, claim
from think.streaming._builder import MessageBuilder
from think.workflows._inputs import (
    CommitInput,
    CommitResult,
    ModelStepInput,
    ModelStepResult,
    PrepareResult,
    ToolCallInput,
    ToolCallRef,
    ToolCallResult,
    TurnInput,
)
from think.workflows._names import (
    COMMIT_ACTIVITY,
    MODEL_STEP_ACTIVITY,
    PREPARE_ACTIVITY,
    TOOL_CALL_ACTIVITY,
)

log = logging.getLogger("think.activities")


class TurnActivities:
    """Holds what activities share in one worker: the store, the agents, the settings."""

    def __init__(self, store: Store, registry: AgentRegistry, settings: Settings) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings

    def activities(self) -> list[Any]:
        return [self.prepare_turn, self.model_step, self.tool_call, self.commit_turn]

    def _agent(self, name: str) -> Think:
        try:
            return self.registry.get(name)()
        except UserError as exc:
            raise ApplicationError(
                str(exc), type=NON_RETRYABLE_USER_ERROR, non_retryable=True
            ) from exc

    # -- prepare ---------------------------------------------------------------------------

    @activity.defn(name=PREPARE_ACTIVITY)
    async def prepare_turn(self, inp: TurnInput) -> PrepareResult:
        """Append the user's messages under the active leaf (as it is now, when the turn runs,
        not when it was accepted) and open the stream with `start`."""
        async with self.store.engine.begin() as conn:
            turn = await self.store.lock_turn(conn, inp.turn_id)
            if turn.terminal:
                return PrepareResult(run=False)
            agent = self._agent(turn.agent)
            if turn.status == "pending":
                conversation = await self.store.conversation_by_uid(conn, turn.conversation_uid)
                parent = turn.request.parent_id or conversation.active_leaf_id
                leaf = await self.store.insert_messages(
                    conn,
                    turn.conversation_uid,
                    turn.request.messages,
                    parent_id=parent,
                    turn_id=turn.id,
                )
                if leaf is not None:
                    await self.store.set_active_leaf(conn, turn.conversation_uid, leaf)
                await self.store.update_turn(
                    conn,
                    turn.id,
                    status="running",
                    started_at=text("now()"),
                    parent_id=leaf,
                    message={"id": turn.message_id, "role": "assistant", "parts": []},
                )
                await append(conn, turn.id, [{"type": "start", "messageId": turn.message_id}])
        model = agent.get_model()
        return PrepareResult(
            run=True,
            max_steps=agent.max_steps,
            steps_done=turn.steps_done,
            model=model if isinstance(model, str) else model.name,
        )

    # -- model step ------------------------------------------------------------------------

    @activity.defn(name=MODEL_STEP_ACTIVITY)
    async def model_step(self, inp: ModelStepInput) -> ModelStepResult:
        info = activity.info()
        fence = Fence(key=f"step-{inp.step}", attempt=info.attempt)
        async with self.store.engine.begin() as conn:
            turn = await self.store.lock_turn(conn, inp.turn_id)
            if turn.steps_done > inp.step:
                # A previous attempt finished this step but its completion never reached
                # Temporal: answer from what it recorded instead of calling the model again.
                return _recorded_step(turn.message or {}, inp.step, turn.usage)
            await claim(conn, turn.id, fence)
            transcript = await self.store.path(turn.conversation_uid, turn.parent_id, conn)
        agent = self._agent(turn.agent)
        tools = agent.get_tools()
        builder = MessageBuilder(turn.message)
        messages = to_chat_messages(agent.get_system_prompt(), transcript)
        messages += to_chat_messages("", [_as_ui(builder.message)]) if builder.parts else []
        request = ModelRequest(
            model=_model_id(agent),
            messages=messages,
            tools=[t.spec for t in tools],
            metadata={"conversation-id": turn.conversation_id, "turn-id": turn.id},
        )
        model = resolve_model(agent.get_model(), self.settings)
        writer = ChunkWriter(
            self.store.engine, turn.id, fence, interval=self.settings.chunk_flush_interval
        )
        step = _StepStream(builder, writer, inp.step)
        finish = Finish()
        try:
            step.emit({"type": "start-step"})
            async with heartbeating():
                async for event in model.stream(request):
                    activity.heartbeat()
                    if isinstance(event, TextDelta):
                        step.text(event.delta)
                    elif isinstance(event, ReasoningDelta):
                        step.reasoning(event.delta)
                    elif isinstance(event, ToolCallStart):
                        step.tool_start(event.tool_call_id, event.tool_name)
                    elif isinstance(event, ToolCallDelta):
                        step.tool_delta(event.tool_call_id, event.delta)
                    elif isinstance(event, Finish):
                        finish = event
            calls = step.close()
            rest = await writer.drain()
        except StaleAttempt as exc:
            await writer.abort()
            raise ApplicationError(str(exc), type=STALE_ATTEMPT, non_retryable=True) from exc
        except ModelError as exc:
            await writer.abort()
            if exc.retryable:
                raise
            raise ApplicationError(
                str(exc), type=NON_RETRYABLE_MODEL_ERROR, non_retryable=True
            ) from exc
        usage = {
            "input_tokens": turn.usage.get("input_tokens", 0) + finish.usage.input_tokens,
            "output_tokens": turn.usage.get("output_tokens", 0) + finish.usage.output_tokens,
        }
        async with self.store.engine.begin() as conn:
            await append(conn, turn.id, rest, fence)
            await self.store.update_turn(
                conn, turn.id, message=builder.message, steps_done=inp.step + 1, usage=usage
            )
        return ModelStepResult(
            tool_calls=calls,
            called_tools=step.called_tools,
            finish_reason=finish.finish_reason,
            input_tokens=finish.usage.input_tokens,
            output_tokens=finish.usage.output_tokens,
        )

    # -- tool call -------------------------------------------------------------------------

    @activity.defn(name=TOOL_CALL_ACTIVITY)
    async def tool_call(self, inp: ToolCallInput) -> ToolCallResult:
        turn = await self.store.get_turn(inp.turn_id)
        if turn is None:
            raise ApplicationError(f"turn {inp.turn_id!r} does not exist", non_retryable=True)
        part = MessageBuilder(turn.message).tool_part(inp.tool_call_id)
        if part is None:
            raise ApplicationError(f"no tool call {inp.tool_call_id!r}", non_retryable=True)
        if str(part.get("state", "")).startswith("output-"):
            return ToolCallResult(ok=part["state"] == "output-available")
        chunk = await self._run_tool(turn.agent, inp, part.get("input"))
        async with self.store.engine.begin() as conn:
            locked = await self.store.lock_turn(conn, inp.turn_id)
            builder = MessageBuilder(locked.message)
            settled = builder.tool_part(inp.tool_call_id) or {}
            if str(settled.get("state", "")).startswith("output-"):
                return ToolCallResult(ok=settled["state"] == "output-available")
            builder.apply(chunk)
            await append(conn, inp.turn_id, [chunk])
            await self.store.update_turn(conn, inp.turn_id, message=builder.message)
        return ToolCallResult(ok=chunk["type"] == "tool-output-available")

    async def _run_tool(
        self, agent_name: str, inp: ToolCallInput, raw_input: Any
    ) -> dict[str, Any]:
        tool_name, tool_call_id = inp.tool_name, inp.tool_call_id
        agent = self._agent(agent_name)
        tool = agent.tools_by_name().get(tool_name)
        try:
            if tool is None:
                raise ToolError(f"there is no tool named {tool_name!r}")
            if tool.needs_approval:
                # Never run an approval-gated tool unapproved; the approval flow pauses turns
                # for a person and is not part of this version yet.
                raise ToolError(
                    f"tool {tool_name!r} needs a person's approval, which is unavailable"
                )
            if not isinstance(raw_input, dict):
                raise ToolError(f"the input of {tool_name!r} must be a JSON object")
            arguments = tool.validate(raw_input)
            async with heartbeating():
                output = await tool(**arguments)
            return {
                "type": "tool-output-available",
                "toolCallId": tool_call_id,
                "output": to_jsonable_python(output, fallback=str),
            }
        except ToolError as exc:
            error = str(exc)
        except Exception as exc:
            log.warning("tool %s failed", tool_name, exc_info=True)
            error = f"{type(exc).__name__}: {exc}"
        return {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error}

    # -- commit ----------------------------------------------------------------------------

    @activity.defn(name=COMMIT_ACTIVITY)
    async def commit_turn(self, inp: CommitInput) -> CommitResult:
        """Store the assistant message and the final status, and end the stream: one
        transaction, so a client never sees `finish` for a message that is not stored."""
        async with self.store.engine.begin() as conn:
            turn = await self.store.lock_turn(conn, inp.turn_id)
            if turn.terminal:
                return CommitResult(status=turn.status)
            message = turn.message or {"id": turn.message_id, "role": "assistant", "parts": []}
            if inp.status == "completed":
                chunk: dict[str, Any] = {"type": "finish", "finishReason": inp.finish_reason}
            else:
                chunk = {"type": "error", "errorText": inp.error or "the turn failed"}
            stored = inp.status == "completed" or bool(message["parts"])
            if stored:
                await self.store.insert_messages(
                    conn,
                    turn.conversation_uid,
                    [_as_ui(message)],
                    parent_id=turn.parent_id,
                    turn_id=turn.id,
                )
                await self.store.set_active_leaf(conn, turn.conversation_uid, message["id"])
            await self.store.update_turn(
                conn,
                turn.id,
                status=inp.status,
                completed_at=text("now()"),
                error=inp.error,
                message=message,
            )
            await append(conn, turn.id, [chunk])
        return CommitResult(status=inp.status)


class _StepStream:
    """Turns model events into UI message chunks, keeping builder and stream in lockstep."""

    def __init__(self, builder: MessageBuilder, writer: ChunkWriter, step: int) -> None:
        self.builder = builder
        self.writer = writer
        self.step = step
        self._open: tuple[str, str] | None = None  # ("text" | "reasoning", part id)
        self._count = 0
        self._calls: dict[str, tuple[str, list[str]]] = {}

    def emit(self, chunk: dict[str, Any]) -> None:
        self.builder.apply(chunk)
        self.writer.emit(chunk)

    def _switch(self, kind: str | None) -> str | None:
        if self._open and self._open[0] != kind:
            self.emit({"type": f"{self._open[0]}-end", "id": self._open[1]})
            self._open = None
        if kind and not self._open:
            self._count += 1
            self._open = (kind, f"{kind[0]}{self.step}-{self._count}")
            self.emit({"type": f"{kind}-start", "id": self._open[1]})
        return self._open[1] if self._open else None

    def text(self, delta: str) -> None:
        self.emit({"type": "text-delta", "id": self._switch("text"), "delta": delta})

    def reasoning(self, delta: str) -> None:
        self.emit({"type": "reasoning-delta", "id": self._switch("reasoning"), "delta": delta})

    def tool_start(self, tool_call_id: str, tool_name: str) -> None:
        self._switch(None)
        self._calls[tool_call_id] = (tool_name, [])
        self.emit({"type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name})

    def tool_delta(self, tool_call_id: str, delta: str) -> None:
        self._calls[tool_call_id][1].append(delta)
        self.emit({"type": "tool-input-delta", "toolCallId": tool_call_id, "inputTextDelta": delta})

    @property
    def called_tools(self) -> bool:
        return bool(self._calls)

    def close(self) -> list[ToolCallRef]:
        self._switch(None)
        refs: list[ToolCallRef] = []
        for call_id, (name, fragments) in self._calls.items():
            raw = "".join(fragments)
            try:
                value: Any = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as exc:
                # Settled as an error right here; the model reads it and can try again.
                self.emit(
                    {
                        "type": "tool-input-error",
                        "toolCallId": call_id,
                        "toolName": name,
                        "input": raw,
                        "errorText": f"the arguments are not valid JSON: {exc}",
                    }
                )
                continue
            self.emit(
                {
                    "type": "tool-input-available",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": value,
                }
            )
            refs.append(ToolCallRef(tool_call_id=call_id, tool_name=name))
        self.emit({"type": "finish-step"})
        return refs


def _recorded_step(message: dict[str, Any], step: int, usage: dict[str, Any]) -> ModelStepResult:
    steps: list[list[dict[str, Any]]] = []
    for part in message.get("parts", []):
        if part.get("type") == "step-start":
            steps.append([])
        elif steps:
            steps[-1].append(part)
    parts = steps[step] if step < len(steps) else []
    calls = [
        ToolCallRef(tool_call_id=p["toolCallId"], tool_name=str(p["type"])[len("tool-") :])
        for p in parts
        if str(p.get("type", "")).startswith("tool-")
    ]
    called = any(str(p.get("type", "")).startswith("tool-") for p in parts)
    return ModelStepResult(
        tool_calls=[c for c in calls if _unsettled(parts, c.tool_call_id)],
        called_tools=called,
        finish_reason="tool-calls" if called else "stop",
    )


def _unsettled(parts: list[dict[str, Any]], tool_call_id: str) -> bool:
    return any(
        p.get("toolCallId") == tool_call_id and not str(p.get("state", "")).startswith("output-")
        for p in parts
    )


def _as_ui(message: dict[str, Any]) -> Any:
    from think._messages import UIMessage

    return UIMessage.model_construct(
        id=message["id"],
        role=message.get("role", "assistant"),
        parts=message.get("parts", []),
        metadata=message.get("metadata"),
    )


def _model_id(agent: Think) -> str:
    model = agent.get_model()
    return model if isinstance(model, str) else model.name
