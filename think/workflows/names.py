"""Stable names of workflows, activities, updates and search attributes, and workflow ids.

Never derived from Python qualnames, so a refactor cannot orphan running workflows.

A workflow id joins the turn's tenant, agent, conversation and turn id with `:`, each part
percent-encoded (`:` and `%` included), so no name can make two turns share an id or read as
another tenant's: `acme` + `probe-z1` and `acme-probe` + `z1` stay apart whatever characters a
name holds. `parse_turn_workflow_id` is its inverse.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple
from urllib.parse import quote, unquote

from temporalio.common import SearchAttributeKey

TURN_WORKFLOW = "think.ChatTurn"
MODEL_STEP_ACTIVITY = "think.model_step"
TOOL_CALL_ACTIVITY = "think.tool_call"
COMMIT_ACTIVITY = "think.commit_turn"
QUIET_ACTIVITY = "think.quiet_left"
AFTER_TURN_WORKFLOW = "think.AfterTurn"
CHAT_RESPONSE_ACTIVITY = "think.chat_response"
COMPACT_ACTIVITY = "think.compact_context"
AGENT_TOOL_START_ACTIVITY = "think.agent_tool_start"
AGENT_TOOL_FINISH_ACTIVITY = "think.agent_tool_finish"
CANCEL_CHILDREN_ACTIVITY = "think.cancel_child_turns"
RUN_TURN_WORKFLOW = "think.RunTurn"
"""A turn run for a user's own workflow code (`think.workflow.run_turn`), as its child."""
RUN_TURN_ADMIT_ACTIVITY = "think.run_turn_admit"
RUN_TURN_RESULT_ACTIVITY = "think.run_turn_result"
RUN_TURN_CANCEL_ACTIVITY = "think.run_turn_cancel"
PARKED_ACTION_WORKFLOW = "think.ParkedAction"
"""An `@action(approval="durable_pause")` call waiting, outside any turn, for its decision."""
PARKED_ACTION_ACTIVITY = "think.run_parked_action"
DELIVERY_WORKFLOW = "think.MessengerDelivery"
"""One reply (or notice) posted into a messenger thread (`think.messenger_turns`)."""
DELIVERY_ACTIVITY = "think.messenger_deliver"


def delivery_workflow_id(delivery_id: str) -> str:
    """The delivery's workflow id: one per delivery, so starting it twice starts it once."""
    return f"messenger-delivery:{quote(delivery_id, safe='')}"


WEBHOOKS_START_ACTIVITY = "think.start_webhooks"
"""A turn that ended or paused starts one `think.WebhookDelivery` per subscribed URL."""
WEBHOOK_DELIVERY_WORKFLOW = "think.WebhookDelivery"
"""One outbound webhook event to one URL, delivered at least once (`think.webhooks`)."""
WEBHOOK_POST_ACTIVITY = "think.post_webhook"
WEBHOOK_REJECTED = "WebhookRejected"
"""ApplicationError type: the receiver answered a 4xx other than 408/429 (never retried)."""
TURN_ENDED = "turn_ended"
"""Signal: a turn tells the `think.RunTurn` workflow that admitted it that it has ended
(`TurnEnded`)."""
CHILD_TURN_ENDED = "child_turn_ended"
"""Signal: a delegated turn tells its parent's workflow it has ended (`ChildTurnEnded`)."""
APPROVE = "approve"
"""Update and Signal: a person's decision on an approval request (`ToolDecision`)."""
SUBMIT_TOOL_RESULT = "submit_tool_result"
"""Update and Signal: a client tool's result (`ToolResultSubmission`)."""
STATUS_QUERY = "status"

# ApplicationError types an `approve` or `submit_tool_result` Update fails with.
UNKNOWN_APPROVAL = "UnknownApproval"
ALREADY_DECIDED = "AlreadyDecided"
UNKNOWN_TOOL_CALL = "UnknownToolCall"
ALREADY_ANSWERED = "AlreadyAnswered"

# One name per attribute, never two joined in one value: a Keyword holds a name exactly as it
# is, so `ThinkTenant = 'acme' AND ThinkConversationId = 'z1'` finds that tenant's turns only.
SA_TENANT = "ThinkTenant"
SA_AGENT = "ThinkAgent"
SA_CONVERSATION = "ThinkConversationId"
SA_TURN_STATUS = "ThinkTurnStatus"
SA_PARENT_TURN = "ThinkParentTurn"
"""On a sub-agent's turn: the id of the turn that delegated it (`ThinkParentTurn="…"` lists a
turn's children in the Temporal UI)."""
SEARCH_ATTRIBUTES = (SA_TENANT, SA_AGENT, SA_CONVERSATION, SA_TURN_STATUS, SA_PARENT_TURN)


TENANT_KEY = SearchAttributeKey.for_keyword(SA_TENANT)
AGENT_KEY = SearchAttributeKey.for_keyword(SA_AGENT)
CONVERSATION_KEY = SearchAttributeKey.for_keyword(SA_CONVERSATION)
TURN_STATUS_KEY = SearchAttributeKey.for_keyword(SA_TURN_STATUS)
PARENT_TURN_KEY = SearchAttributeKey.for_keyword(SA_PARENT_TURN)

TURN_ID_PREFIX = "turn"
DEFAULT_TENANT = "default"


class TurnWorkflowRef(NamedTuple):
    tenant: str
    agent: str
    conversation_id: str
    turn_id: str


def _encode(part: str) -> str:
    # `quote` leaves `-._~` alone and encodes `:` and `%`, which is all the separator needs.
    return quote(part, safe="")


def turn_workflow_id(
    agent: str, conversation_id: str, turn_id: str, *, tenant: str = DEFAULT_TENANT
) -> str:
    """`turn:<tenant>:<agent>:<conversation>:<turn_id>`, each part percent-encoded."""
    parts = (tenant, agent, conversation_id, turn_id)
    return ":".join([TURN_ID_PREFIX, *map(_encode, parts)])


def after_turn_workflow_id(turn_workflow: str) -> str:
    """The id of the `think.AfterTurn` workflow a turn's workflow (`turn_workflow`, its id)
    starts once it has ended: `after-<turn workflow id>`."""
    return f"after-{turn_workflow}"


def parked_action_workflow_id(tenant: str, approval_id: str) -> str:
    """`action:<tenant>:<approval id>`, each part percent-encoded: one workflow per parked
    action, found again from the approval id a decision names."""
    return ":".join(["action", _encode(tenant), _encode(approval_id)])


def parse_turn_workflow_id(workflow_id: str) -> TurnWorkflowRef | None:
    """The names a turn's workflow id was made of; None for an id that is not a turn's."""
    parts = workflow_id.split(":")
    if len(parts) != 5 or parts[0] != TURN_ID_PREFIX:
        return None
    tenant, agent, conversation_id, turn_id = map(unquote, parts[1:])
    return TurnWorkflowRef(tenant, agent, conversation_id, turn_id)


def webhook_workflow_id(event_id: str, url: str) -> str:
    """The delivery workflow of one event to one URL: deterministic, so that starting it
    again (a retried start, a replayed turn) finds the one already started."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return f"webhook:{event_id}:{digest}"
