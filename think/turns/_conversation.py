"""One conversation as Python code reaches it (`ConversationHandle`): run, submit and stream
its turns through the one front door (`think.turns._admission.admit_submission`), wait for,
drive and cancel them, and delegate to its sub-agents. What it holds besides (messages without
a turn, configuration, context blocks, compaction, submission records) is
`think.turns._conversation_state`; `run_turn`'s typed face is `think.agent._turn_api`.
`ThinkService.conversation(...)` makes one; inside a worker, hooks and tools reach their own
through `current_conversation()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from think._current import BOUND
from think._messages import ID, UIMessage
from think._protocol import chunk_kind, is_error_chunk
from think.agent import (
    AgentToolResult,
    MessagesFunction,
    StreamedTurn,
    Submission,
    Think,
    TurnAPI,
    TurnInput,
    TurnResult,
    answer_text,
    child_conversation_id,
    client_tool_spec,
    delegation_failure,
    input_json,
    messages_of,
    typed_output,
)
from think.exceptions import UserError
from think.storage import (
    ACTIVE_STATUSES,
    MessageConcurrency,
    TurnNotFound,
    TurnRecord,
    public_turn_id,
    steer_turn,
)
from think.tools import maybe_await
from think.turns._admission import admit_submission
from think.turns._cancelling import cancel_turn
from think.turns._conversation_state import _OUTSIDE, ConversationState
from think.turns._stream import TurnStream, call_back
from think.turns._views import turn_view
from think.turns._waiting import wait_for_answer, wait_until_idle

log = logging.getLogger("think.turns")


class ConversationHandle(ConversationState, TurnAPI):
    """One conversation, and everything code can do to it: `run_turn` and its shortcuts here,
    messages without a turn and the submission records in `ConversationState`."""

    def __repr__(self) -> str:
        return f"<ConversationHandle {self.agent.name}/{self.conversation_id}>"

    async def conversation(self) -> ConversationHandle:
        """This conversation: what `run_turn` runs turns on."""
        return self

    async def admit_turn(
        self,
        input: TurnInput | MessagesFunction | None = None,
        *,
        mode: Literal["wait", "submit", "stream"] = "wait",
        idempotency_key: str | None = None,
        submission_id: str | None = None,
        parent_id: str | None = None,
        body: dict[str, Any] | None = None,
        client_tools: Sequence[dict[str, Any]] = (),
        concurrency: MessageConcurrency | None = None,
        continuation: bool = False,
        wait_timeout: float | None = None,
    ) -> TurnResult | Submission | TurnStream:
        """`run_turn`, typed by its implementation rather than by mode."""
        if mode not in ("wait", "submit", "stream"):
            raise UserError(f"mode must be 'wait', 'submit' or 'stream', not {mode!r}")
        if continuation == (input is not None):
            raise UserError("give exactly one of input and continuation=True")
        if mode == "submit" and callable(input):
            raise UserError("a function input is for wait and stream modes; submit takes messages")
        if submission_id is not None and not ID.fullmatch(submission_id):
            raise UserError(f"submission_id {submission_id!r} is not a valid id")
        if mode != "submit":
            await self._refuse_nested(f"run_turn(mode={mode!r})")
        # From inside a turn of this conversation, a submission waits for it, whatever the
        # agent's mode: "latest" or "interrupt" would cancel the very turn submitting it.
        inside = concurrency is None and await self._inside_own_turn() is not None
        messages, given = await self._input_messages(input)
        service = self.service
        admission = await admit_submission(
            service.store,
            service.temporal,
            service.settings.task_queue,
            self.agent,
            tenant=self.tenant,
            conversation_id=self.conversation_id,
            messages=messages,
            input=given,
            parent_id=parent_id,
            body=body,
            client_tools=[client_tool_spec(t) for t in client_tools],
            concurrency=concurrency,
            default_concurrency="queue" if inside else None,
            submission_id=submission_id,
            continuation=continuation,
            idempotency_key=idempotency_key,
            awaited=mode == "wait",
        )
        if mode == "submit":
            return turn_view(admission.turn, accepted=admission.accepted).submission()
        if mode == "stream":
            return TurnStream(self, admission)
        try:
            return await self.result_of(
                admission.turn,
                wait_timeout=wait_timeout,
                accepted=admission.accepted,
                queued=not admission.runs_now,
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._caller_cancelled(admission.turn.id))
            raise

    async def chat(
        self,
        input: TurnInput | MessagesFunction,
        callback: Any,
        *,
        body: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Run a turn, driving `callback` (a `StreamCallback`, or any object with some of its
        methods) with its chunks; returns how it ended.

        `on_start(request_id)` first; `on_event(chunk)` per chunk; `on_interrupted()` each time
        an attempt is interrupted and a retry (the continuation) takes over the step, whose
        partial output the stream then discards (`reset-step`): keep the channel open, the
        continuation owns the answer. The call ends with exactly one of `on_done()` (the turn
        completed, or was skipped) and `on_error(message)` (it failed, was cancelled, or ran
        out of recovery): never `on_interrupted`, which is not an ending.

        Cancelling the awaiting task (`asyncio`) cancels the turn, for a call made outside a
        turn (inside one, only when that turn is being cancelled too), its partial answer kept.
        """
        stream = await self.run_turn(
            input, mode="stream", body=body, idempotency_key=idempotency_key
        )
        try:
            return await self._drive(stream, callback)
        except asyncio.CancelledError:
            await asyncio.shield(self._caller_cancelled(stream.stored_id))
            raise

    async def _drive(self, stream: StreamedTurn, callback: Any) -> TurnResult:
        await call_back(callback, "on_start", stream.turn_id)
        error_text: str | None = None
        async for chunk in stream:
            if is_error_chunk(chunk):
                error_text = str(chunk.get("errorText") or "")
            await call_back(callback, "on_event", chunk)
            if chunk_kind(chunk) == "reset-step":
                await call_back(callback, "on_interrupted")
        result = await stream.result()
        if result.status in ("completed", "skipped"):
            await call_back(callback, "on_done")
        elif result.status == "aborted":
            await call_back(callback, "on_error", f"aborted: {result.error or 'cancelled'}")
        else:
            await call_back(callback, "on_error", error_text or result.error or "the turn failed")
        return result

    async def cancel_chat(self, turn_id: str, reason: str = "cancelled") -> bool:
        """Cancel a turn (queued or running; its partial answer is kept). False when it had
        already ended or is not a turn of this conversation: nothing changes then."""
        turn = await self._turn(turn_id)
        if turn is None:
            return False
        service = self.service
        return await cancel_turn(
            service.store, service.temporal, service.settings.task_queue, turn, reason
        )

    async def steer_turn(self, turn_id: str, input: TurnInput) -> list[str]:
        """Send the user's words (`input`: a string, a message or a list of them) to a running
        turn: each message joins its answer at the next step boundary, where the model reads
        it (the AI SDK's steering); a turn whose model has answered takes one more step for
        it. Returns the steering messages' ids. Raises `TurnNotFound`, or `TurnNotSteerable`
        when the turn has ended (submit the words as a new turn then)."""
        messages = messages_of(input)
        if any(m.role != "user" for m in messages):
            raise UserError("a steering message is the user's: every message's role is 'user'")
        conv = await self._conversation()
        if conv is None:
            raise TurnNotFound(turn_id)
        sent = await steer_turn(self.service.store, conv, turn_id, messages)
        return [s.id for s in sent]

    async def wait_until_idle(self, wait_timeout: float | None = None) -> bool:
        """Wait until the conversation has no queued, running or paused turn (the AI SDK chat
        agent's `waitUntilStable`): for code that wants it quiet before it reads the history,
        adds messages or clears it. True once idle; False when `wait_timeout` seconds passed first
        (None: no limit). A turn paused for an approval or a client's tool keeps it busy until
        that is answered; a turn submitted while this waits is waited for too."""
        await self._refuse_nested("waiting for the conversation to be idle", _OUTSIDE)
        conv = await self._conversation()
        if conv is None:
            return True
        listener = await self.service.listener()
        return await wait_until_idle(self.service.store, listener, conv.uid, wait_timeout)

    async def abort_request(self, request_id: str, reason: str = "cancelled") -> bool:
        """`cancel_chat` by the spec's other name (Think's `abortRequest`)."""
        return await self.cancel_chat(request_id, reason)

    async def abort_all_requests(self, reason: str = "cancelled") -> list[str]:
        """Cancel every active turn of the conversation (queued, running or paused; Think's
        `abortAllRequests`), partial answers kept. Returns the ids it cancelled."""
        conv = await self._conversation()
        if conv is None:
            return []
        service = self.service
        active = await service.store.list_turns(conv.uid, status=sorted(ACTIVE_STATUSES))
        cancelled = []
        # Newest first: a queued turn is aborted before the running one ends and starts it.
        for turn in active:
            if await cancel_turn(
                service.store, service.temporal, service.settings.task_queue, turn, reason
            ):
                cancelled.append(public_turn_id(turn.id))
        return cancelled

    def sub_agent(self, agent: type[Think], name: str) -> ConversationHandle:
        """The child conversation `name` of this one, of agent `agent`: same tenant, its id
        derived from this conversation's agent and id and `name` (`lead.c1.child-1`). The
        deployment must host `agent`: list it in the parent's `sub_agents`, or use it in one of
        the parent's `agent_tool`s."""
        if agent.name not in self.service.registry:
            raise UserError(
                f"agent {agent.name!r} is not hosted here, so its turns would never run: add "
                f"it to {self.agent.__name__}.sub_agents (or THINK_AGENTS)"
            )
        child = child_conversation_id(self.agent.name, self.conversation_id, name)
        return ConversationHandle(self.service, agent, child, self.tenant)

    async def run_agent_tool(
        self,
        agent: type[Think],
        input: str,
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
        wait_timeout: float | None = None,
    ) -> AgentToolResult:
        """Delegate `input` to `agent` from code, as the parent's agent tool `name` (default:
        the agent's name) would from the model: a turn of the same retained child
        conversation, waited for (Think's `runAgentTool`). Returns what the tool would have
        recorded, with `error` set when the child's turn has no answer (it failed, was
        cancelled or interrupted, or was skipped), and `structured` the child's typed output
        (an instance of its output class) when its turn had an output type. Pass an
        `idempotency_key` (from a tool, its `ctx.idempotency_key`) so that a retried caller
        re-attaches to the child's turn instead of starting another."""
        child = self.sub_agent(agent, name or agent.name)
        result = await child.save_messages(
            input, idempotency_key=idempotency_key, wait_timeout=wait_timeout
        )
        message = result.message.model_dump(mode="json") if result.message else None
        structured: Any = None
        if result.output is not None:
            # The class the child's turn named, by the import path kept with the turn.
            record = await child._turn(result.turn_id)
            structured = typed_output(record.config if record else None, result.output)
        failure = None
        if result.status != "completed" and not result.answered_by:
            failure = delegation_failure(
                agent.name, result.status, result.error, result.turn_id, child.conversation_id
            )
        return AgentToolResult(
            agent=agent.name,
            conversation_id=child.conversation_id,
            turn_id=result.turn_id,
            status=result.status,
            text=answer_text(message),
            structured=structured,
            error=failure or (result.error if result.status != "completed" else None),
        )

    async def _caller_cancelled(self, turn_id: str) -> None:
        """The task awaiting a turn it started was cancelled: cancel the turn too, unless the
        caller serves a turn that is not itself being cancelled (a worker shutting down
        cancels its activities; their retry re-attaches to the same turn)."""
        binding = BOUND.get()
        if binding is not None:
            serving = await binding.turn(fresh=True)
            if not serving.terminal and serving.error is None:
                return
        turn = await self._turn(turn_id)
        if turn is None:
            return
        try:
            service = self.service
            await cancel_turn(
                service.store,
                service.temporal,
                service.settings.task_queue,
                turn,
                "the caller was cancelled",
            )
        except Exception:
            log.warning("could not cancel turn %s after its caller was", turn_id, exc_info=True)

    async def result(
        self, turn_id: str, *, wait_timeout: float | None = None, accepted: bool = True
    ) -> TurnResult:
        """Wait for a turn of this conversation to end (or pause for a person), or for
        `wait_timeout` seconds, and say how it stands; at once, still pending, when the turn
        ahead of it waits for a person (`TurnResult.queued_behind`). Raises `TurnNotFound`
        when the conversation has no turn `turn_id`."""
        await self._refuse_nested("waiting for a turn")
        turn = await self._turn(turn_id)
        if turn is None:
            raise TurnNotFound(turn_id)
        return await self.result_of(turn, wait_timeout=wait_timeout, accepted=accepted)

    async def result_of(
        self,
        turn: TurnRecord,
        *,
        wait_timeout: float | None = None,
        accepted: bool = True,
        queued: bool = True,
    ) -> TurnResult:
        """`result` of a turn whose record the caller has (an admission's, a stream's): no
        lookup of its name first. The caller refused nested waits already. `queued=False`:
        its admission started it, so no turn ahead can hold it (`wait_for_answer`)."""
        listener = await self.service.listener()
        waited = await wait_for_answer(
            self.service.store, listener, turn.id, wait_timeout, queued=queued
        )
        return turn_view(waited.turn, accepted=accepted).result(waited.queued_behind)

    # -- internals -------------------------------------------------------------------------

    async def _input_messages(
        self, input: TurnInput | MessagesFunction | None
    ) -> tuple[list[UIMessage], Any]:
        """The messages a turn's input appends, and the input as HTTP's body would carry it
        (for the idempotency fingerprint): a function is evaluated on the messages now."""
        if callable(input):
            messages = await self._evaluate(input)
            return messages, [m.model_dump(mode="json") for m in messages]
        if input is not None:
            messages = messages_of(input)
            return messages, input_json(input, messages)
        return [], None

    async def _evaluate(self, fn: MessagesFunction) -> list[UIMessage]:
        current = await self.messages()
        answer = fn(list(current))
        produced = await maybe_await(answer)
        known = {m.id for m in current}
        fresh = [m for m in messages_of(list(produced)) if m.id not in known]
        if not fresh:
            raise UserError("the messages function added no message")
        return fresh
