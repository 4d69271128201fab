"""The server-side face of the framework: what the gateway (`api/`) and the worker entry point
(`workers/`) are built from. Neither imports a private module of `think`; what they need is
named here, so the framework's insides can move without breaking them.

- connecting: `Settings`, `connect` (Temporal, with the data converter and tracing),
  `AgentRegistry`;
- turns: `admit`, `request_hash`, `resolve_concurrency`, `wait_for_turn`, `settled`, `follow`
  (the SSE replay loop), `cancel_turn`, `hand_off`, `DispatchFailed`, `RESEND_AFTER`;
- decisions sent to a paused turn: `ToolDecision`, `ToolResultSubmission`, `APPROVE`,
  `SUBMIT_TOOL_RESULT`, `turn_workflow_id`;
- the worker: `run_worker`, `build_worker`, `sweep_once`, `workflow_runner`, `WORKFLOWS`.
"""

from think._messages import ID, UIMessage, new_id
from think._settings import Settings
from think.agent import AgentRegistry, Think
from think.engine._worker import build_worker, run_worker, sweep_once, workflow_runner
from think.turns import ThinkService
from think.turns._admission import (
    RESEND_AFTER,
    admit,
    cancel_turn,
    follow,
    request_hash,
    resolve_concurrency,
    settled,
    wait_for_turn,
)
from think.turns._dispatch import DispatchFailed, hand_off
from think.workflows import WORKFLOWS
from think.workflows._connect import connect
from think.workflows._inputs import ToolDecision, ToolResultSubmission
from think.workflows._names import APPROVE, SUBMIT_TOOL_RESULT, turn_workflow_id

__all__ = [
    "APPROVE",
    "ID",
    "RESEND_AFTER",
    "SUBMIT_TOOL_RESULT",
    "WORKFLOWS",
    "AgentRegistry",
    "DispatchFailed",
    "Settings",
    "Think",
    "ThinkService",
    "ToolDecision",
    "ToolResultSubmission",
    "UIMessage",
    "admit",
    "build_worker",
    "cancel_turn",
    "connect",
    "follow",
    "hand_off",
    "new_id",
    "request_hash",
    "resolve_concurrency",
    "run_worker",
    "settled",
    "sweep_once",
    "turn_workflow_id",
    "wait_for_turn",
    "workflow_runner",
]
