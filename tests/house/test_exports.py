"""The public surface is deliberate: a new export is a decision, not an accident."""

from __future__ import annotations

import think
import think.models
import think.testing
import think.tools


def test_think_exports() -> None:
    assert sorted(think.__all__) == [
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
    for name in think.__all__:
        assert getattr(think, name) is not None


def test_submodule_exports_resolve() -> None:
    for module in (think.models, think.testing, think.tools):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_workflow_exports() -> None:
    """`think.workflow`, what a user's own workflow code imports (in the sandbox): nothing
    else, so that it stays free of I/O."""
    import think.workflow

    assert sorted(think.workflow.__all__) == ["TurnEnding", "TurnResult", "run_turn"]


def test_a_run_turn_ending_is_a_terminal_status() -> None:
    from typing import get_args

    from think.storage import TERMINAL_STATUSES
    from think.workflow import TurnEnding

    assert set(get_args(TurnEnding)) == set(TERMINAL_STATUSES)


def test_sandbox_exports() -> None:
    """`think.sandbox`, what `exec` and code mode build on."""
    import think.sandbox

    assert sorted(think.sandbox.__all__) == [
        "FileChange",
        "FileChangeKind",
        "GUEST_LIB",
        "KillReason",
        "Language",
        "Limits",
        "RequestHandler",
        "SandboxError",
        "SandboxPathError",
        "SandboxResult",
        "python_executable",
        "run",
        "serve_channel",
    ]
    for name in think.sandbox.__all__:
        assert getattr(think.sandbox, name) is not None
