"""What a turn shows operators while it runs or waits: the Temporal UI's current details
("awaiting approval: …", "step 2 (gpt-…): running tools"), the ThinkTurnStatus search
attribute, and the status Query."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from think.workflows.inputs import PendingCall, TurnStatusView
    from think.workflows.names import STATUS_QUERY, TURN_STATUS_KEY

if TYPE_CHECKING:
    from think.workflows._turn._approvals_and_client_tools import Approvals, ClientToolCalls


class TurnProgress:
    """The part of `TurnWorkflow` that says what the turn does: set by the step loop and by
    each answer (`TurnAnswers`), read in the Temporal UI and through the status Query."""

    _step: int
    _approvals: Approvals
    _client_tools: ClientToolCalls

    def __init__(self) -> None:
        super().__init__()
        self._shown_status = "running"

    def _show_progress(self, step: int, model: str) -> None:
        """Say in the Temporal UI what the turn waits for, and keep ThinkTurnStatus in step."""
        waiting_approval = [call for _, call in self._approvals.waiting()]
        waiting_client = [call for _, call in self._client_tools.waiting()]
        if waiting_approval:
            status = "awaiting_approval"
            details = "; ".join(f"awaiting approval: {c.preview}" for c in waiting_approval)
        elif waiting_client:
            status = "awaiting_client_tool"
            details = "; ".join(f"awaiting client tool: {c.preview}" for c in waiting_client)
        else:
            status = "running"
            details = f"step {step + 1}{f' ({model})' if model else ''}: running tools"
        workflow.set_current_details(details)
        if status != self._shown_status:
            self._shown_status = status
            self._status(status)

    def _status(self, status: str) -> None:
        workflow.upsert_search_attributes([TURN_STATUS_KEY.value_set(status)])

    @workflow.query(name=STATUS_QUERY)
    def status(self) -> TurnStatusView:
        return TurnStatusView(
            status=self._shown_status,
            step=self._step,
            pending_approvals=[
                PendingCall(
                    tool_call_id=c.tool_call_id,
                    tool_name=c.tool_name,
                    approval_id=i,
                    preview=c.preview,
                )
                for i, c in self._approvals.waiting()
            ],
            pending_client_tools=[
                PendingCall(tool_call_id=i, tool_name=c.tool_name, preview=c.preview)
                for i, c in self._client_tools.waiting()
            ],
        )
