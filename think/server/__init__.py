"""The server-side face of the framework: what the gateway (`api/`) and the worker entry point
(`workers/`) are built from. They import `think.server` and `think.exceptions` only
(tests/house/test_layers.py says so); what they need is named here, so the framework's insides
can move without breaking them.

- connecting: `Settings`, `connect` (Temporal, with the data converter and tracing),
  `AgentRegistry`, `ChunkListener` (one LISTEN per process: what waits and streams wake on);
- turns, the one front door shared with `ThinkService`: `admit_submission` (a submission's
  mode, request and idempotency fingerprint, then `admit`), `dispatch` (what follows an
  admission's commit, a regenerate's too), `turn_fingerprint`, `request_hash`,
  `resolve_concurrency`, `wait_for_turn`, `wait_for_answer` (and what it ended with,
  `Waited`), `settled`, `follow` (the SSE replay loop),
  `cancel_turn`, `hand_off`, `DispatchFailed`, `RESEND_AFTER`;
- the turn view every door shows: `turn_view`, `TurnView`, `TurnFields` (what HTTP's `Turn`
  shows of it as it is), `PendingApproval`, `PendingClientTool`, `client_tool_names`;
- what a paused turn waits for, read from its message: `approval_request`,
  `approval_decided`, `client_tool_call`, `tool_call_answered`;
- answers sent to a paused turn (approvals and client tool results): `ToolDecision`,
  `ToolResultSubmission`, `APPROVE`, `SUBMIT_TOOL_RESULT`, `turn_workflow_id`, `record_answer`,
  `AnswerKind`;
- the records the routes read and write: `Store`, `open_database`, `TurnRecord`,
  `Conversation`, `Admission`, `TurnStatus`, `TERMINAL_STATUSES`, `PAUSED_STATUSES`,
  `MessageConcurrency`, `queue_head`, `delete_turn`, `delete_turns`, `search_messages`,
  `MAX_SEARCH_LIMIT`, `public_turn_id`, `public_turn_id_or_none`, and the errors they raise;
- a turn's chunks as they are announced: `ChunkListener`; models, tools and schedules the
  routes name: `resolve_model`, `Tool`, `close_mcp_pool`, `list_schedules`, `trigger`,
  `ScheduleNotFound`; the `metrics` module;
- a conversation's workspace, for the gateway's reads: `Workspace`, `workspace_path`,
  `WorkspacePathError`;
- the worker: `run_worker`, `build_worker`, `sweep_once`, `workflow_runner`, `WORKFLOWS`.
"""

from think import metrics
from think._messages import ID, UIMessage, new_id
from think._settings import Settings
from think.agent import AgentRegistry, Think
from think.engine import build_worker, run_worker, sweep_once, workflow_runner
from think.models import resolve_model
from think.schedules import ScheduleNotFound, list_schedules, trigger
from think.storage import (
    MAX_SEARCH_LIMIT,
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    AnswerKind,
    Conversation,
    ConversationBusy,
    IdempotencyConflict,
    MessageConcurrency,
    MessageIdConflict,
    MessageNotFound,
    NotRegenerable,
    ParentNotFound,
    Store,
    SubmissionConflict,
    TurnNotFound,
    TurnRecord,
    TurnStatus,
    TurnStillActive,
    UsageGroup,
    UsageGrouping,
    UsageSum,
    Workspace,
    WorkspacePathError,
    conversation_usage,
    delete_turn,
    delete_turns,
    open_database,
    public_turn_id,
    public_turn_id_or_none,
    queue_head,
    record_answer,
    search_messages,
    tenant_usage,
    workspace_path,
)
from think.streaming import ChunkListener
from think.tools import Tool, close_mcp_pool
from think.turns import (
    RESEND_AFTER,
    DispatchFailed,
    PendingApproval,
    PendingClientTool,
    ThinkService,
    TurnFields,
    TurnView,
    Waited,
    admit,
    admit_submission,
    approval_decided,
    approval_request,
    cancel_turn,
    client_tool_call,
    client_tool_names,
    dispatch,
    follow,
    hand_off,
    request_hash,
    resolve_concurrency,
    settled,
    tool_call_answered,
    turn_fingerprint,
    turn_view,
    wait_for_answer,
    wait_for_turn,
)
from think.workflows import WORKFLOWS, connect
from think.workflows.inputs import ToolDecision, ToolResultSubmission
from think.workflows.names import APPROVE, SUBMIT_TOOL_RESULT, turn_workflow_id

__all__ = [
    "APPROVE",
    "ID",
    "MAX_SEARCH_LIMIT",
    "PAUSED_STATUSES",
    "RESEND_AFTER",
    "SUBMIT_TOOL_RESULT",
    "TERMINAL_STATUSES",
    "WORKFLOWS",
    "Admission",
    "AgentRegistry",
    "AnswerKind",
    "ChunkListener",
    "Conversation",
    "ConversationBusy",
    "DispatchFailed",
    "IdempotencyConflict",
    "MessageConcurrency",
    "MessageIdConflict",
    "MessageNotFound",
    "NotRegenerable",
    "ParentNotFound",
    "PendingApproval",
    "PendingClientTool",
    "ScheduleNotFound",
    "Settings",
    "Store",
    "SubmissionConflict",
    "Think",
    "ThinkService",
    "Tool",
    "ToolDecision",
    "ToolResultSubmission",
    "TurnFields",
    "TurnNotFound",
    "TurnRecord",
    "TurnStatus",
    "TurnStillActive",
    "TurnView",
    "UIMessage",
    "UsageGroup",
    "UsageGrouping",
    "UsageSum",
    "Waited",
    "Workspace",
    "WorkspacePathError",
    "admit",
    "admit_submission",
    "approval_decided",
    "approval_request",
    "build_worker",
    "cancel_turn",
    "client_tool_call",
    "client_tool_names",
    "close_mcp_pool",
    "connect",
    "conversation_usage",
    "delete_turn",
    "delete_turns",
    "dispatch",
    "follow",
    "hand_off",
    "list_schedules",
    "metrics",
    "new_id",
    "open_database",
    "public_turn_id",
    "public_turn_id_or_none",
    "queue_head",
    "record_answer",
    "request_hash",
    "resolve_concurrency",
    "resolve_model",
    "run_worker",
    "search_messages",
    "settled",
    "sweep_once",
    "tenant_usage",
    "tool_call_answered",
    "trigger",
    "turn_fingerprint",
    "turn_view",
    "turn_workflow_id",
    "wait_for_answer",
    "wait_for_turn",
    "workflow_runner",
    "workspace_path",
]
