"""Turns: admission (idempotency, `message_concurrency`, the queue in Postgres), starting a
turn's workflow (`hand_off`), waiting for and following a turn, cancelling one, and the Python
turn API (`ThinkService`, `ConversationHandle`).

One front door: the gateway (`api/`), `ThinkService` and the worker (through `ThinkService`)
all admit through `admit_submission` here, with one idempotency fingerprint
(`turn_fingerprint`), and show a turn through one view (`turn_view`); a regenerate, recorded
by `Store.regenerate`, is started by the same rule (`dispatch`). Imported by `engine`,
`server` and the apps.
"""

from think.agent import MessagesFunction, Submission, TurnInput, TurnResult
from think.turns._admission import (
    RESEND_AFTER,
    admit,
    admit_submission,
    dispatch,
    resolve_concurrency,
)
from think.turns._cancelling import cancel_turn
from think.turns._conversation_lifecycle import clear_conversation, delete_conversation
from think.turns._dispatch import (
    DispatchFailed,
    fairness_key,
    hand_off,
    host_queue,
    start_turn_workflow,
    turn_priority,
)
from think.turns._fingerprint import request_hash, turn_fingerprint
from think.turns._follow import asked_at, follow, stream_tail, tenant_turn
from think.turns._parked_decisions import (
    decide_parked_action,
    parked_settled,
    signal_parked_decision,
)
from think.turns._service import (
    ConversationHandle,
    StreamCallback,
    ThinkService,
    current_conversation,
)
from think.turns._stream import TurnStream
from think.turns._views import (
    PendingApproval,
    PendingClientTool,
    TurnFields,
    TurnView,
    approval_decided,
    approval_request,
    client_tool_call,
    client_tool_names,
    tool_call_answered,
    turn_view,
)
from think.turns._waiting import Waited, settled, wait_for_answer, wait_for_turn

__all__ = [
    "RESEND_AFTER",
    "ConversationHandle",
    "DailyBudgets",
    "DispatchFailed",
    "MessagesFunction",
    "Overspent",
    "PendingApproval",
    "PendingClientTool",
    "StreamCallback",
    "Submission",
    "ThinkService",
    "TurnFields",
    "TurnInput",
    "TurnResult",
    "TurnStream",
    "TurnView",
    "Waited",
    "admit",
    "admit_submission",
    "approval_decided",
    "approval_request",
    "asked_at",
    "cancel_turn",
    "clear_conversation",
    "client_tool_call",
    "client_tool_names",
    "current_conversation",
    "decide_parked_action",
    "delete_conversation",
    "dispatch",
    "fairness_key",
    "follow",
    "hand_off",
    "host_queue",
    "parked_settled",
    "request_hash",
    "resolve_concurrency",
    "settled",
    "signal_parked_decision",
    "start_turn_workflow",
    "stream_tail",
    "tenant_turn",
    "tool_call_answered",
    "turn_fingerprint",
    "turn_priority",
    "turn_view",
    "wait_for_answer",
    "wait_for_turn",
]
