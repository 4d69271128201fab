"""What a turn pauses for: a person's answer to an approval request, and a client's result for
a client tool call (both "answers", recorded in `turn_answers`). The Updates and Signals that
bring them; what the turn shows while it waits is `_progress`.

An Update is refused with an error its caller sees; a Signal cannot be refused, so one the
turn cannot use is dropped with one log line (`think.workflows._turn._signals`). Both wait
while a model step is in flight: the id may be one that step is about to announce.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import (
        ApprovalOutcome,
        ToolCallRef,
        ToolDecision,
        ToolResultSubmission,
    )
    from think.workflows.names import (
        ALREADY_ANSWERED,
        ALREADY_DECIDED,
        APPROVE,
        SUBMIT_TOOL_RESULT,
        UNKNOWN_APPROVAL,
        UNKNOWN_TOOL_CALL,
    )

from think.workflows._turn._progress import TurnProgress
from think.workflows._turn._signals import drop_signal, signal_payload

AnswerT = TypeVar("AnswerT", ToolDecision, ToolResultSubmission)


class Requests(ABC, Generic[AnswerT]):
    """The calls of a turn that wait for one kind of answer from outside it, by id (as the
    model steps announced them), and the answers given so far. A subclass names the kind: the
    Update and Signal that answer it, and the words of their refusals."""

    signal: str
    """The name of the Update and of the Signal that answer these requests."""

    def __init__(self) -> None:
        self.calls: dict[str, ToolCallRef] = {}
        self.answers: dict[str, AnswerT] = {}

    def waiting(self) -> list[tuple[str, ToolCallRef]]:
        """The calls not answered yet, with their ids, in the order they were asked."""
        return [(key, call) for key, call in self.calls.items() if key not in self.answers]

    def refuse_answered(self, key: str) -> None:
        """Refuse a second answer to the same request."""
        if key in self.answers:
            raise self.answered(key)

    @abstractmethod
    def unknown(self, key: str) -> ApplicationError:
        """An Update's refusal of an answer to nothing this turn asked."""

    @abstractmethod
    def not_asked(self, key: str) -> str:
        """Why a Signal answering nothing this turn asked is dropped."""

    @abstractmethod
    def answered(self, key: str) -> ApplicationError:
        """The refusal of an answer to a request that has one."""


class Approvals(Requests[ToolDecision]):
    """Approval requests, by approval id, and the decisions on them (`approve`)."""

    signal = APPROVE

    def unknown(self, key: str) -> ApplicationError:
        return ApplicationError(
            f"this turn has no approval request {key!r}", type=UNKNOWN_APPROVAL, non_retryable=True
        )

    def not_asked(self, key: str) -> str:
        waiting = ", ".join(repr(waiting_key) for waiting_key, _ in self.waiting())
        return f"no approval request {key!r}" + (
            f" (it waits for {waiting})" if waiting else " (it waits for none)"
        )

    def answered(self, key: str) -> ApplicationError:
        return ApplicationError(
            f"approval {key!r} is already decided", type=ALREADY_DECIDED, non_retryable=True
        )


class ClientToolCalls(Requests[ToolResultSubmission]):
    """Client tool calls, by tool call id, and the results clients gave (`submit_tool_result`)."""

    signal = SUBMIT_TOOL_RESULT

    def unknown(self, key: str) -> ApplicationError:
        return ApplicationError(
            f"this turn waits for no client tool call {key!r}",
            type=UNKNOWN_TOOL_CALL,
            non_retryable=True,
        )

    def not_asked(self, key: str) -> str:
        return f"no client tool call {key!r}"

    def answered(self, key: str) -> ApplicationError:
        return ApplicationError(
            f"tool call {key!r} already has a result", type=ALREADY_ANSWERED, non_retryable=True
        )


class TurnAnswers(TurnProgress):
    """The part of `TurnWorkflow` that waits for people and clients, and says what it waits
    for. The step loop tells it which step runs (`_step`, `_planning`) and which calls a step
    announced (`_expect`)."""

    def __init__(self) -> None:
        super().__init__()
        self._step = 0
        self._planning = True
        """A model step is in flight: approval ids and client calls it creates are not known
        yet, so a decision that names one waits instead of being refused as unknown."""
        self._executing = 0
        """Tool activities in flight: a code-mode program's call may ask for an approval the
        workflow learns of only when its activity ends, so a decision waits for them too."""
        self._approvals = Approvals()
        self._client_tools = ClientToolCalls()

    def _expect(self, calls: Sequence[ToolCallRef]) -> None:
        """The calls a model step announced: those that wait for a decision are asked now."""
        for call in calls:
            if call.kind in ("approval", "agent") and call.approval_id:
                self._approvals.calls[call.approval_id] = call
            elif call.kind == "client":
                self._client_tools.calls[call.tool_call_id] = call

    async def _decision(self, call: ToolCallRef, approval_id: str) -> ToolDecision:
        """The decision on an approval-gated call: a person's, or a denial once the tool's
        approval timeout has passed."""
        timeout = call.run.approval_timeout_seconds
        decisions = self._approvals.answers
        try:
            await workflow.wait_condition(
                lambda: approval_id in decisions,
                timeout=timedelta(seconds=timeout) if timeout else None,
                timeout_summary=f"approval of {call.tool_name}",
            )
        except TimeoutError:
            decisions[approval_id] = ToolDecision(
                approval_id=approval_id,
                approved=False,
                reason=f"no decision within {timeout:g} seconds",
                by="timeout",
            )
        return decisions[approval_id]

    async def _client_result(self, call: ToolCallRef) -> ToolResultSubmission:
        """The result a client gives for a client tool call (no timeout: cancel the turn)."""
        results = self._client_tools.answers
        await workflow.wait_condition(lambda: call.tool_call_id in results)
        return results[call.tool_call_id]

    # -- the Updates and Signals ----------------------------------------------------------

    @workflow.update(name=APPROVE)
    async def approve(self, decision: ToolDecision) -> ApprovalOutcome:
        """Record a person's decision and answer with it (`temporal workflow update execute`
        prints it), so the caller sees which call it decided and how."""
        await self._answer(self._approvals, decision.approval_id, decision)
        call = self._approvals.calls[decision.approval_id]
        return ApprovalOutcome(
            approval_id=decision.approval_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            approved=decision.approved,
            outcome="approved" if decision.approved else "denied",
            reason=decision.reason,
            by=decision.by,
        )

    @approve.validator
    def _check_approve(self, decision: ToolDecision) -> None:
        self._approvals.refuse_answered(decision.approval_id)

    @workflow.signal(name=APPROVE)
    async def approve_signal(self, payload: Any) -> None:
        """The same as the Update, for the UI's "Send a Signal" button (the CLI should use the
        Update, which answers with an error): a malformed, unknown or repeated decision is
        dropped with one log line naming the turn and why."""
        expected = '{"approval_id": "…", "approved": true}'
        decision = signal_payload(APPROVE, ToolDecision, payload, expected)
        if decision is not None:
            by = "signal" if decision.by == "update" else decision.by  # the gateway says "http"
            await self._answer_signal(
                self._approvals, decision.approval_id, decision.model_copy(update={"by": by})
            )

    @workflow.update(name=SUBMIT_TOOL_RESULT)
    async def submit_tool_result(self, result: ToolResultSubmission) -> None:
        await self._answer(self._client_tools, result.tool_call_id, result)

    @submit_tool_result.validator
    def _check_tool_result(self, result: ToolResultSubmission) -> None:
        self._client_tools.refuse_answered(result.tool_call_id)

    @workflow.signal(name=SUBMIT_TOOL_RESULT)
    async def submit_tool_result_signal(self, payload: Any) -> None:
        """As `approve_signal`: plain JSON validated here, a bad one dropped with one line."""
        expected = '{"tool_call_id": "…"}'
        result = signal_payload(SUBMIT_TOOL_RESULT, ToolResultSubmission, payload, expected)
        if result is not None:
            await self._answer_signal(self._client_tools, result.tool_call_id, result)

    # -- one answer, however it came ---------------------------------------------------------

    async def _answer(self, requests: Requests[AnswerT], key: str, answer: AnswerT) -> None:
        """An Update's answer: refused when this turn asked nothing by that id."""
        await self._known(lambda: key in requests.calls)
        if key not in requests.calls:
            raise requests.unknown(key)
        self._accept(requests, key, answer)

    async def _answer_signal(self, requests: Requests[AnswerT], key: str, answer: AnswerT) -> None:
        """A Signal's answer: dropped when this turn asked nothing by that id, or has the
        answer already."""
        await self._known(lambda: key in requests.calls)
        if key not in requests.calls:
            drop_signal(requests.signal, requests.not_asked(key))
        elif key in requests.answers:
            drop_signal(requests.signal, requests.answered(key).message)
        else:
            self._accept(requests, key, answer)

    def _accept(self, requests: Requests[AnswerT], key: str, answer: AnswerT) -> None:
        requests.refuse_answered(key)
        requests.answers[key] = answer
        self._show_progress(self._step, "")

    async def _known(self, found: Callable[[], bool]) -> None:
        """Wait while a model step is in flight: the id may be one it is about to announce
        (its activity stored it, and a client read it, before this workflow saw the result)."""
        await workflow.wait_condition(lambda: found() or not (self._planning or self._executing))
