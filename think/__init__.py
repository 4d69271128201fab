"""Think for Python: durable chat agents on Temporal, Postgres and FastAPI.

Subclass `Think`, name a model, a system prompt and tools; every turn then runs as a Temporal
workflow, every conversation lives in Postgres, and replies stream over SSE.

The names below load on first use (PEP 562): importing `think` (as a workflow module's import
does, in the sandbox too) costs a few modules, not openai, psycopg and httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from think._messages import UIMessage
    from think._settings import Settings
    from think.agent import (
        AgentTool,
        AgentToolResult,
        Channel,
        ChatErrorContext,
        ChatRecovery,
        ChatRecoveryContext,
        ChatRecoveryOptions,
        ChatResponseResult,
        GatewayContext,
        RecoveryKind,
        StepConfig,
        StepContext,
        StepFinishContext,
        StepResult,
        SubAgent,
        Think,
        ToolCallContext,
        ToolCallDecision,
        ToolCallResultContext,
        TurnConfig,
        TurnContext,
        agent_tool,
    )
    from think.client import AsyncThinkClient, ThinkAPIError, ThinkClient
    from think.exceptions import (
        AgentNotFoundError,
        ConfigurationError,
        ModelError,
        ThinkError,
        ToolError,
        TurnFailed,
        UserError,
    )
    from think.messengers import (
        Messenger,
        MessengerContext,
        SlackMessenger,
        TelegramMessenger,
        get_messenger_context,
    )
    from think.models import ChatErrorClass as ChatErrorClassification
    from think.models import (
        Gateway,
        ModelClient,
        ModelRequest,
        ModelSettings,
        default_context_overflow_classifier,
    )
    from think.schedules import ScheduledRun, ScheduledTask
    from think.sessions import (
        CompactionContext,
        CompactionResult,
        ContextBlock,
        ContextOverflow,
        ContextProvider,
        MediaEviction,
        Proactive,
        Session,
        create_compact_function,
        default_token_counter,
    )
    from think.storage import Compaction, ConversationBusy, MessageConcurrency, SubmissionConflict
    from think.tools import (
        Action,
        ActionContext,
        FetchTarget,
        FetchTools,
        McpServer,
        Tool,
        ToolContext,
        ToolPolicy,
        action,
        attach_reply,
        skills,
        tool,
    )
    from think.turns import (
        ConversationHandle,
        StreamCallback,
        Submission,
        ThinkService,
        TurnResult,
        TurnStream,
        current_conversation,
    )
    from think.webhooks import Webhook

_LAZY: dict[str, tuple[str, str]] = {
    "Action": ("think.tools._action", "Action"),
    "ActionContext": ("think.tools._action", "ActionContext"),
    "action": ("think.tools._action", "action"),
    "attach_reply": ("think.tools._action", "attach_reply"),
    "AgentNotFoundError": ("think.exceptions", "AgentNotFoundError"),
    "AgentTool": ("think.agent._agent_tool", "AgentTool"),
    "AgentToolResult": ("think.agent._agent_tool", "AgentToolResult"),
    "AsyncThinkClient": ("think.client", "AsyncThinkClient"),
    "Channel": ("think.agent._channels", "Channel"),
    "ChatErrorClassification": ("think.models._overflow", "ChatErrorClass"),
    "ChatErrorContext": ("think.agent._turn_hooks", "ChatErrorContext"),
    "ChatRecovery": ("think.agent._recovery", "ChatRecovery"),
    "ChatRecoveryContext": ("think.agent._recovery", "ChatRecoveryContext"),
    "ChatRecoveryOptions": ("think.agent._recovery", "ChatRecoveryOptions"),
    "RecoveryKind": ("think.agent._recovery", "RecoveryKind"),
    "ChatResponseResult": ("think.agent._turn_hooks", "ChatResponseResult"),
    "Compaction": ("think.storage._compactions", "Compaction"),
    "CompactionContext": ("think.sessions._compaction", "CompactionContext"),
    "CompactionResult": ("think.sessions._compaction", "CompactionResult"),
    "ConfigurationError": ("think.exceptions", "ConfigurationError"),
    "ContextBlock": ("think.sessions._context_blocks", "ContextBlock"),
    "ContextOverflow": ("think.sessions._session", "ContextOverflow"),
    "ContextProvider": ("think.sessions._context_blocks", "ContextProvider"),
    "FetchTarget": ("think.tools._fetch", "FetchTarget"),
    "FetchTools": ("think.tools._fetch", "FetchTools"),
    "Gateway": ("think.models", "Gateway"),
    "GatewayContext": ("think.agent", "GatewayContext"),
    "ConversationBusy": ("think.storage", "ConversationBusy"),
    "ConversationHandle": ("think.turns._service", "ConversationHandle"),
    "MessageConcurrency": ("think.storage", "MessageConcurrency"),
    "Messenger": ("think.messengers", "Messenger"),
    "MessengerContext": ("think.messengers", "MessengerContext"),
    "SlackMessenger": ("think.messengers", "SlackMessenger"),
    "TelegramMessenger": ("think.messengers", "TelegramMessenger"),
    "get_messenger_context": ("think.messengers", "get_messenger_context"),
    "MediaEviction": ("think.sessions._eviction", "MediaEviction"),
    "ModelClient": ("think.models", "ModelClient"),
    "ModelError": ("think.exceptions", "ModelError"),
    "ModelRequest": ("think.models", "ModelRequest"),
    "ModelSettings": ("think.models", "ModelSettings"),
    "Proactive": ("think.sessions._session", "Proactive"),
    "ScheduledRun": ("think.schedules", "ScheduledRun"),
    "ScheduledTask": ("think.schedules", "ScheduledTask"),
    "Session": ("think.sessions._session", "Session"),
    "Settings": ("think._settings", "Settings"),
    "StepConfig": ("think.agent._turn_hooks", "StepConfig"),
    "StepContext": ("think.agent._turn_hooks", "StepContext"),
    "StepFinishContext": ("think.agent._turn_hooks", "StepFinishContext"),
    "StepResult": ("think.agent._turn_hooks", "StepResult"),
    "StreamCallback": ("think.turns._service", "StreamCallback"),
    "SubAgent": ("think.agent._agent_tool", "SubAgent"),
    "Submission": ("think.turns._service", "Submission"),
    "SubmissionConflict": ("think.storage", "SubmissionConflict"),
    "Think": ("think.agent._think", "Think"),
    "ThinkAPIError": ("think.client", "ThinkAPIError"),
    "ThinkClient": ("think.client", "ThinkClient"),
    "ThinkError": ("think.exceptions", "ThinkError"),
    "ThinkService": ("think.turns._service", "ThinkService"),
    "McpServer": ("think.tools._mcp", "McpServer"),
    "Tool": ("think.tools._tool", "Tool"),
    "ToolCallContext": ("think.agent._tool_hooks", "ToolCallContext"),
    "ToolCallDecision": ("think.agent._tool_hooks", "ToolCallDecision"),
    "ToolCallResultContext": ("think.agent._tool_hooks", "ToolCallResultContext"),
    "ToolContext": ("think.tools._tool", "ToolContext"),
    "ToolError": ("think.exceptions", "ToolError"),
    "ToolPolicy": ("think.tools._tool", "ToolPolicy"),
    "TurnConfig": ("think.agent._turn_hooks", "TurnConfig"),
    "TurnContext": ("think.agent._turn_hooks", "TurnContext"),
    "TurnFailed": ("think.exceptions", "TurnFailed"),
    "TurnResult": ("think.turns._service", "TurnResult"),
    "TurnStream": ("think.turns._service", "TurnStream"),
    "UIMessage": ("think._messages", "UIMessage"),
    "UserError": ("think.exceptions", "UserError"),
    "Webhook": ("think.webhooks._declaration", "Webhook"),
    "agent_tool": ("think.agent._agent_tool", "agent_tool"),
    "create_compact_function": ("think.sessions._compaction", "create_compact_function"),
    "skills": ("think.tools", "skills"),
    "current_conversation": ("think.turns._service", "current_conversation"),
    "default_context_overflow_classifier": (
        "think.models._overflow",
        "default_context_overflow_classifier",
    ),
    "default_token_counter": ("think.sessions._compaction", "default_token_counter"),
    "tool": ("think.tools._tool", "tool"),
}
"""Public name -> (module, attribute)."""

__all__ = [
    "Action",
    "ActionContext",
    "AgentNotFoundError",
    "AgentTool",
    "AgentToolResult",
    "AsyncThinkClient",
    "Channel",
    "ChatErrorClassification",
    "ChatErrorContext",
    "ChatRecovery",
    "ChatRecoveryContext",
    "ChatRecoveryOptions",
    "ChatResponseResult",
    "Compaction",
    "CompactionContext",
    "CompactionResult",
    "ConfigurationError",
    "ContextBlock",
    "ContextOverflow",
    "ContextProvider",
    "ConversationBusy",
    "ConversationHandle",
    "FetchTarget",
    "FetchTools",
    "Gateway",
    "GatewayContext",
    "McpServer",
    "MediaEviction",
    "MessageConcurrency",
    "Messenger",
    "MessengerContext",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
    "Proactive",
    "RecoveryKind",
    "ScheduledRun",
    "ScheduledTask",
    "Session",
    "Settings",
    "SlackMessenger",
    "StepConfig",
    "StepContext",
    "StepFinishContext",
    "StepResult",
    "StreamCallback",
    "SubAgent",
    "Submission",
    "SubmissionConflict",
    "TelegramMessenger",
    "Think",
    "ThinkAPIError",
    "ThinkClient",
    "ThinkError",
    "ThinkService",
    "Tool",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallResultContext",
    "ToolContext",
    "ToolError",
    "ToolPolicy",
    "TurnConfig",
    "TurnContext",
    "TurnFailed",
    "TurnResult",
    "TurnStream",
    "UIMessage",
    "UserError",
    "Webhook",
    "action",
    "agent_tool",
    "attach_reply",
    "create_compact_function",
    "current_conversation",
    "default_context_overflow_classifier",
    "default_token_counter",
    "get_messenger_context",
    "skills",
    "tool",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'think' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # once loaded, a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
