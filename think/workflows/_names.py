"""Stable names of workflows, activities, updates and search attributes, and workflow ids.

Never derived from Python qualnames, so a refactor cannot orphan running workflows.
"""

from __future__ import annotations

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

SA_AGENT = "ThinkAgent"
SA_CONVERSATION = "ThinkConversationId"
SA_TURN_STATUS = "ThinkTurnStatus"
SA_PARENT_TURN = "ThinkParentTurn"
"""On a sub-agent's turn: the id of the turn that delegated it (`ThinkParentTurn="…"` lists a
turn's children in the Temporal UI)."""
SEARCH_ATTRIBUTES = (SA_AGENT, SA_CONVERSATION, SA_TURN_STATUS, SA_PARENT_TURN)


AGENT_KEY = SearchAttributeKey.for_keyword(SA_AGENT)
CONVERSATION_KEY = SearchAttributeKey.for_keyword(SA_CONVERSATION)
TURN_STATUS_KEY = SearchAttributeKey.for_keyword(SA_TURN_STATUS)
PARENT_TURN_KEY = SearchAttributeKey.for_keyword(SA_PARENT_TURN)


def turn_workflow_id(agent: str, conversation_id: str, turn_id: str) -> str:
    return f"turn-{agent}-{conversation_id}-{turn_id}"
