"""The agent: the `Think` base class a team subclasses, its hooks' contexts, the turn API on
the agent itself (`self.run_turn(...)`), compaction driven by its hooks, and the registry of
hosted agents.

Who may import it: `turns`, `engine`, `schedules`, `server` and the apps (see the layers in
docs/architecture.md). It imports the layers below it (sessions, tools, models, storage).
"""

from think.agent._agent_tool import (
    AgentTool,
    AgentToolResult,
    SubAgent,
    agent_tool,
    answer_text,
    child_conversation_id,
    delegation_failure,
    typed_output,
)
from think.agent._channels import WEB_CHANNEL, Channel, ChannelError, channel_of, declared_channels
from think.agent._compactor import compact, model_view
from think.agent._conversation_methods import bind_config
from think.agent._gateway_context import GatewayContext, ModelPurpose, TurnTrigger, ask_gateway
from think.agent._recovery import (
    ChatRecovery,
    ChatRecoveryContext,
    ChatRecoveryOptions,
    RecoveryKind,
)
from think.agent._registry import AgentRegistry
from think.agent._side_models import AskGateway, SideModel, gateway_of, step_usage
from think.agent._think import Think
from think.agent._tool_hooks import ToolCallContext, ToolCallDecision, ToolCallResultContext
from think.agent._turn_api import StreamedTurn, TurnAPI, TurnConversation
from think.agent._turn_hooks import (
    ChatErrorContext,
    ChatErrorStage,
    ChatResponseResult,
    StepConfig,
    StepContext,
    StepFinishContext,
    StepResult,
    StoredTurnConfig,
    ToolCallRecord,
    TurnConfig,
    TurnContext,
    stored_or,
)
from think.agent._turn_input import (
    MessageLike,
    MessagesFunction,
    TurnInput,
    client_tool_spec,
    input_json,
    messages_of,
)
from think.agent._turn_results import QueuedBehind, StreamCallback, Submission, TurnResult

__all__ = [
    "WEB_CHANNEL",
    "AgentRegistry",
    "AgentTool",
    "AgentToolResult",
    "AskGateway",
    "Channel",
    "ChannelError",
    "ChatErrorContext",
    "ChatErrorStage",
    "ChatRecovery",
    "ChatRecoveryContext",
    "ChatRecoveryOptions",
    "ChatResponseResult",
    "GatewayContext",
    "MessageLike",
    "MessagesFunction",
    "ModelPurpose",
    "QueuedBehind",
    "RecoveryKind",
    "SideModel",
    "StepConfig",
    "StepContext",
    "StepFinishContext",
    "StepResult",
    "StoredTurnConfig",
    "StreamCallback",
    "StreamedTurn",
    "SubAgent",
    "Submission",
    "Think",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallRecord",
    "ToolCallResultContext",
    "TurnAPI",
    "TurnConfig",
    "TurnContext",
    "TurnConversation",
    "TurnInput",
    "TurnResult",
    "TurnTrigger",
    "agent_tool",
    "answer_text",
    "ask_gateway",
    "bind_config",
    "channel_of",
    "child_conversation_id",
    "client_tool_spec",
    "compact",
    "declared_channels",
    "delegation_failure",
    "gateway_of",
    "input_json",
    "messages_of",
    "model_view",
    "step_usage",
    "stored_or",
    "typed_output",
]
