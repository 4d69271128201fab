"""The conversation entity: admits turns and runs them one at a time, in acceptance order.

One long-lived workflow per conversation. Submissions arrive as the `submit` Update (sent with
update-with-start, so the first one also starts the workflow); each turn runs as a child
workflow with its own page in the Temporal UI. The entity continues-as-new regularly, carrying
its queue, so its own history stays small however long the conversation gets.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError

# Pydantic models and plain constants only: safe to share with the sandbox instead of
# re-importing them for every workflow run.
with workflow.unsafe.imports_passed_through():
    from think.workflows._inputs import (
        CommitInput,
        ConversationInput,
        SubmitTurn,
        TurnInput,
    )
    from think.workflows._names import (
        AGENT_KEY,
        COMMIT_ACTIVITY,
        CONVERSATION_KEY,
        CONVERSATION_WORKFLOW,
        SUBMIT_UPDATE,
        TURN_STATUS_KEY,
        TURN_WORKFLOW,
        turn_workflow_id,
    )

IDLE_TIMEOUT = timedelta(minutes=30)
TURNS_PER_RUN = 200
SEEN_KEPT = 500


@workflow.defn(name=CONVERSATION_WORKFLOW)
class ConversationWorkflow:
    @workflow.init
    def __init__(self, inp: ConversationInput) -> None:
        self._queue: list[str] = list(inp.queue)
        self._seen: list[str] = list(inp.seen)
        self._seen_set = set(self._seen)
        self._turns_run = 0
        self._current: str | None = None

    @workflow.update(name=SUBMIT_UPDATE)
    def submit(self, request: SubmitTurn) -> None:
        if request.turn_id in self._seen_set:
            return
        self._seen.append(request.turn_id)
        self._seen_set.add(request.turn_id)
        self._queue.append(request.turn_id)

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
            self._current = turn_id
            workflow.set_current_details(f"running turn {turn_id}; {len(self._queue)} queued")
            await self._run_turn(inp, turn_id)
            self._current = None
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
                    )
                )

    async def _run_turn(self, inp: ConversationInput, turn_id: str) -> None:
        conv = inp.conversation
        try:
            await workflow.execute_child_workflow(
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
        except ChildWorkflowError as exc:
            # A turn workflow that failed outright (a bug, not a model or tool error) must still
            # leave a terminal record, or its clients would wait forever.
            workflow.logger.exception("turn %s failed", turn_id)
            await workflow.execute_activity(
                COMMIT_ACTIVITY,
                CommitInput(turn_id=turn_id, status="error", error=_readable(exc)),
                start_to_close_timeout=timedelta(seconds=30),
                summary="record the failed turn",
            )


def _readable(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__
