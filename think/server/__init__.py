"""The server-side face of the framework: what the gateway (`api/`) and the worker entry point
(`workers/`) are built from. Neither imports a private module of `think`; what they need is
named here, so the framework's insides can move without breaking them.

- connecting: `Settings`, `connect` (Temporal, with the data converter and tracing),
  `AgentRegistry`;
- turns, the one front door shared with `ThinkService`: `admit_submission` (a submission's
  mode, request and idempotency fingerprint, then `admit`), `dispatch` (what follows an
  admission's commit, a regenerate's too), `turn_fingerprint`, `request_hash`,
  `resolve_concurrency`, `wait_for_turn`, `settled`, `follow` (the SSE replay loop),
  `cancel_turn`, `hand_off`, `DispatchFailed`, `RESEND_AFTER`;
- the turn view every door shows: `turn_view`, `TurnView`, `TurnFields` (what HTTP's `Turn`
  shows of it as it is), `PendingApproval`, `PendingClientTool`, `client_tool_names`,
  `tool_part_name`;
- decisions sent to a paused turn: `ToolDecision`, `ToolResultSubmission`, `APPROVE`,
  `SUBMIT_TOOL_RESULT`, `turn_workflow_id`;
- a conversation's workspace, for the gateway's reads: `Workspace`, `workspace_path`,
  `WorkspacePathError`;
- the worker: `run_worker`, `build_worker`, `sweep_once`, `workflow_runner`, `WORKFLOWS`.
"""

from think._messages import ID, UIMessage, new_id
from think._settings import Settings
from think.agent import AgentRegistry, Think
from think.engine import build_worker, run_worker, sweep_once, workflow_runner
from think.storage import Workspace, WorkspacePathError, workspace_path
from think.turns import (
    RESEND_AFTER,
    DispatchFailed,
    PendingApproval,
    PendingClientTool,
    ThinkService,
    TurnFields,
    TurnView,
    admit,
    admit_submission,
    cancel_turn,
    client_tool_names,
    dispatch,
    follow,
    hand_off,
    request_hash,
    resolve_concurrency,
    settled,
    tool_part_name,
    turn_fingerprint,
    turn_view,
    wait_for_turn,
)
from think.workflows import WORKFLOWS, connect
from think.workflows.inputs import ToolDecision, ToolResultSubmission
from think.workflows.names import APPROVE, SUBMIT_TOOL_RESULT, turn_workflow_id

__all__ = [
    "APPROVE",
    "ID",
    "RESEND_AFTER",
    "SUBMIT_TOOL_RESULT",
    "WORKFLOWS",
    "AgentRegistry",
    "DispatchFailed",
    "PendingApproval",
    "PendingClientTool",
    "Settings",
    "Think",
    "ThinkService",
    "ToolDecision",
    "ToolResultSubmission",
    "TurnFields",
    "TurnView",
    "UIMessage",
    "Workspace",
    "WorkspacePathError",
    "admit",
    "admit_submission",
    "build_worker",
    "cancel_turn",
    "client_tool_names",
    "connect",
    "dispatch",
    "follow",
    "hand_off",
    "new_id",
    "request_hash",
    "resolve_concurrency",
    "run_worker",
    "settled",
    "sweep_once",
    "tool_part_name",
    "turn_fingerprint",
    "turn_view",
    "turn_workflow_id",
    "wait_for_turn",
    "workflow_runner",
    "workspace_path",
]
