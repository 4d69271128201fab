"""Think for Python: durable chat agents on Temporal, Postgres and FastAPI.

Subclass `Think`, name a model, a system prompt and tools; every turn then runs as a Temporal
workflow, every conversation lives in Postgres, and replies stream over SSE.
"""

from think._messages import UIMessage
from think._settings import Settings
from think.agent._recovery import ChatRecovery, ChatRecoveryContext, ChatRecoveryOptions
from think.agent._think import Think
from think.agent._tool_hooks import ToolCallContext, ToolCallDecision, ToolCallResultContext
from think.agent._turn_hooks import (
    ChatErrorContext,
    ChatResponseResult,
    StepConfig,
    StepContext,
    StepFinishContext,
    StepResult,
    TurnConfig,
    TurnContext,
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
from think.models import ModelClient, ModelRequest
from think.models._overflow import ChatErrorClass as ChatErrorClassification
from think.models._overflow import default_context_overflow_classifier
from think.schedules import ScheduledRun, ScheduledTask
from think.sessions._compaction import (
    CompactionContext,
    CompactionResult,
    create_compact_function,
    default_token_counter,
)
from think.sessions._context_blocks import ContextBlock, ContextProvider
from think.sessions._session import ContextOverflow, Proactive, Session
from think.storage import ConversationBusy, MessageConcurrency, SubmissionConflict
from think.storage._compactions import Compaction
from think.tools._tool import Tool, ToolContext, ToolPolicy, tool
from think.turns._service import (
    ConversationHandle,
    StreamCallback,
    Submission,
    ThinkService,
    TurnResult,
    TurnStream,
    current_conversation,
)

__all__ = [
    "AgentNotFoundError",
    "AsyncThinkClient",
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
    "MessageConcurrency",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "Proactive",
    "ScheduledRun",
    "ScheduledTask",
    "Session",
    "Settings",
    "StepConfig",
    "StepContext",
    "StepFinishContext",
    "StepResult",
    "StreamCallback",
    "Submission",
    "SubmissionConflict",
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
    "create_compact_function",
    "current_conversation",
    "default_context_overflow_classifier",
    "default_token_counter",
    "tool",
]
