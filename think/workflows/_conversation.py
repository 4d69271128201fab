"""The conversation entity: admits turns and runs them one at a time, in acceptance order.

One long-lived workflow per conversation. Submissions arrive as the `submit` Update (sent with
update-with-start, so the first one also starts the workflow); each turn runs as a child
workflow with its own page in the Temporal UI. The entity continues-as-new regularly, carrying
its queue, so its own history stays small however long the conversation gets.

It is also the one place that sees overlapping submissions in order, so `message_concurrency`
lives here. The arriving submission's mode decides what happens to what is already there:

- "queue" (and exempt submissions, mode None): wait their turn.
- "latest": queued submissions are skipped; the running turn finishes.
- "interrupt": as "latest", and the running turn is cancelled (its partial answer is kept).
- "rollback": as "interrupt", and the new turn branches from where the cancelled one started.
- "merge": when it comes to run, it absorbs the "merge" submissions queued right behind it.
- "debounce": as "merge", after a quiet period with no new submission.
- "drop": decided at admission (a busy conversation refuses it); queued like "queue" here.

Exempt submissions (regenerates) are never skipped, merged or cancelled.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import CancelledError, ChildWorkflowError

# Pydantic models and plain constants only: safe to share with the sandbox instead of
# re-importing them for every workflow run.
with workflow.unsafe.imports_passed_through():
    from think.workflows._inputs import (
        CommitInput,
        ConversationInput,
        PrepareTurnInput,
        PrepareTurnResult,
        SubmitTurn,
        SupersedeInput,
        SupersedeResult,
        TurnInput,
    )
    from think.workflows._names import (
        AGENT_KEY,
        COMMIT_ACTIVITY,
        CONVERSATION_KEY,
        CONVERSATION_WORKFLOW,
        PREPARE_ACTIVITY,
        SUBMIT_UPDATE,
        SUPERSEDE_ACTIVITY,
        TURN_STATUS_KEY,
        TURN_WORKFLOW,
        turn_workflow_id,
    )

IDLE_TIMEOUT = timedelta(minutes=30)
TURNS_PER_RUN = 200
SEEN_KEPT = 500
SUPERSEDING = frozenset({"latest", "interrupt", "rollback"})
CANCELLING = frozenset({"interrupt", "rollback"})
MERGING = frozenset({"merge", "debounce"})
LOCAL = timedelta(seconds=30)


@workflow.defn(name=CONVERSATION_WORKFLOW)
class ConversationWorkflow:
    @workflow.init
    def __init__(self, inp: ConversationInput) -> None:
        self._queue: list[str] = list(inp.queue)
        self._seen: list[str] = list(inp.seen)
        self._seen_set = set(self._seen)
        self._turns_run = 0
        self._current: str | None = None
        self._submissions: dict[str, SubmitTurn] = {s.turn_id: s for s in inp.submissions}
        """How the queued turns were submitted; absent means mode None (exempt)."""
        self._running: SubmitTurn | None = None
        self._child: workflow.ChildWorkflowHandle[Any, Any] | None = None
        self._cancel: set[str] = set()
        """Running turns a newer submission cancels (once their child has started)."""
        self._arrivals = 0
        self._last_arrival: datetime | None = None

    @workflow.update(name=SUBMIT_UPDATE)
    async def submit(self, request: SubmitTurn) -> None:
        if request.turn_id in self._seen_set:
            return
        self._seen.append(request.turn_id)
        self._seen_set.add(request.turn_id)
        self._arrivals += 1
        self._last_arrival = workflow.now()
        mode = request.concurrency
        if mode not in SUPERSEDING:
            self._enqueue(request)
            return
        # Everything below changes state before its first await, so the run loop never
        # starts a turn this submission is about to skip.
        skip = [t for t in self._queue if self._mode(t) is not None]
        dropped = [self._submissions.pop(t) for t in skip]
        self._queue = [t for t in self._queue if t not in skip]
        running = self._running
        interrupt = None
        if mode in CANCELLING and running is not None and running.concurrency is not None:
            interrupt = running.turn_id
        if mode == "rollback":
            inherited = [d.rollback_of for d in dropped if d.rollback_of is not None]
            target = interrupt or (inherited[-1] if inherited else None)
            request = request.model_copy(update={"rollback_of": target})
        self._enqueue(request)
        if not (skip or interrupt):
            return
        done: SupersedeResult = await workflow.execute_local_activity(
            SUPERSEDE_ACTIVITY,
            SupersedeInput(skip=skip, by=request.turn_id, mode=mode, interrupt=interrupt),
            result_type=SupersedeResult,
            start_to_close_timeout=LOCAL,
            summary=f"{mode}: skip {len(skip)} queued" + (", cancel the running" * bool(interrupt)),
        )
        if interrupt is not None and done.interrupting and self._current == interrupt:
            self._cancel.add(interrupt)
            if self._child is not None:
                self._child.cancel()

    def _enqueue(self, request: SubmitTurn) -> None:
        self._queue.append(request.turn_id)
        if request.concurrency is not None:
            self._submissions[request.turn_id] = request

    def _mode(self, turn_id: str) -> str | None:
        found = self._submissions.get(turn_id)
        return found.concurrency if found else None

    @workflow.query(name="queue")
    def queue(self) -> list[str]:
        return ([self._current] if self._current else []) + self._queue

    @workflow.run
    async def run(self, inp: ConversationInput) -> None:
        while True:
            try:
                await workflow.wait_condition(
                    lambda: bool(self._queue), timeout=IDLE_TIMEOUT, timeout_summary="idle"
                )
            except TimeoutError:
                # Idle: close. A later submission starts a fresh run via update-with-start.
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._queue:
                    return
            turn_id = self._queue.pop(0)
            submission = self._submissions.pop(turn_id, None)
            self._current, self._running = turn_id, submission
            if submission is None or await self._prepare(submission):
                workflow.set_current_details(f"running turn {turn_id}; {len(self._queue)} queued")
                await self._run_turn(inp, turn_id)
            self._current, self._running, self._child = None, None, None
            self._cancel.discard(turn_id)
            workflow.set_current_details(f"idle; {len(self._queue)} queued")
            self._turns_run += 1
            if self._turns_run >= TURNS_PER_RUN or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    ConversationInput(
                        conversation=inp.conversation,
                        queue=self._queue,
                        seen=self._seen[-SEEN_KEPT:],
                        turns_run=inp.turns_run + self._turns_run,
                        submissions=[
                            self._submissions[t] for t in self._queue if t in self._submissions
                        ],
                    )
                )

    async def _prepare(self, head: SubmitTurn) -> bool:
        """Whether the dequeued turn runs, after what its mode does first: a debounce waits
        for quiet, a merge absorbs the submissions queued right behind it, a rollback moves
        the active leaf back, a continuation with nothing to continue is skipped."""
        mode = head.concurrency
        if mode == "debounce":
            await self._quiet(head.debounce_seconds)
        absorb: list[str] = []
        if mode in MERGING:
            for turn_id in self._queue:
                if self._mode(turn_id) != mode:
                    break
                absorb.append(turn_id)
        if not (absorb or head.continuation or head.rollback_of):
            return True
        prepared: PrepareTurnResult = await workflow.execute_local_activity(
            PREPARE_ACTIVITY,
            PrepareTurnInput(
                head=head.turn_id,
                absorb=absorb,
                continuation=head.continuation,
                rollback_of=head.rollback_of,
            ),
            result_type=PrepareTurnResult,
            start_to_close_timeout=LOCAL,
            summary=f"prepare turn {head.turn_id} ({mode})",
        )
        for turn_id in prepared.absorbed:
            if turn_id in self._queue:
                self._queue.remove(turn_id)
            self._submissions.pop(turn_id, None)
        return prepared.run

    async def _quiet(self, seconds: float) -> None:
        """Until no submission has arrived for `seconds`."""
        while self._last_arrival is not None:
            seen = self._arrivals
            left = self._last_arrival + timedelta(seconds=seconds) - workflow.now()
            if left <= timedelta(0):
                return
            workflow.set_current_details(f"debounce: waiting {left.total_seconds():.2f} s")
            if not await self._arrival_after(seen, left):
                return

    async def _arrival_after(self, seen: int, within: timedelta) -> bool:
        """Whether a submission arrives (beyond the `seen` first ones) `within` this time."""
        try:
            await workflow.wait_condition(
                lambda: self._arrivals != seen, timeout=within, timeout_summary="debounce"
            )
        except TimeoutError:
            return False
        return True

    async def _run_turn(self, inp: ConversationInput, turn_id: str) -> None:
        conv = inp.conversation
        try:
            # Started, then awaited (the same commands as `execute_child_workflow`), so that a
            # newer "interrupt" or "rollback" submission can cancel it through the handle.
            self._child = await workflow.start_child_workflow(
                TURN_WORKFLOW,
                TurnInput(conversation=conv, turn_id=turn_id),
                id=turn_workflow_id(conv.agent, conv.conversation_id, turn_id),
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(AGENT_KEY, conv.agent),
                        SearchAttributePair(CONVERSATION_KEY, conv.conversation_id),
                        # Set at start rather than upserted by the turn: one visibility
                        # write less per turn.
                        SearchAttributePair(TURN_STATUS_KEY, "running"),
                    ]
                ),
                static_summary=f"{conv.agent} turn in conversation {conv.conversation_id}",
            )
            if turn_id in self._cancel:
                self._child.cancel()  # asked for while the child was starting
            await self._child
        except ChildWorkflowError as exc:
            # A turn workflow that failed outright (a bug, not a model or tool error) must still
            # leave a terminal record, or its clients would wait forever. One cancelled before
            # it could record anything is recorded as aborted.
            cancelled = isinstance(exc.cause, CancelledError)
            if not cancelled:
                workflow.logger.exception("turn %s failed", turn_id)
            await workflow.execute_activity(
                COMMIT_ACTIVITY,
                CommitInput(
                    turn_id=turn_id,
                    status="aborted" if cancelled else "error",
                    error=None if cancelled else _readable(exc),
                ),
                start_to_close_timeout=timedelta(seconds=30),
                summary="record the failed turn",
            )


def _readable(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__
