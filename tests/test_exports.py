"""The public surface is deliberate: a new export is a decision, not an accident."""

from __future__ import annotations

import think
import think.models
import think.testing


def test_think_exports() -> None:
    assert sorted(think.__all__) == [
        "AgentNotFoundError",
        "AsyncThinkClient",
        "ChatErrorContext",
        "ChatRecovery",
        "ChatRecoveryContext",
        "ChatRecoveryOptions",
        "ChatResponseResult",
        "ConfigurationError",
        "ConversationBusy",
        "ConversationHandle",
        "MessageConcurrency",
        "ModelClient",
        "ModelError",
        "ModelRequest",
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
        "current_conversation",
        "tool",
    ]
    for name in think.__all__:
        assert getattr(think, name) is not None


def test_submodule_exports_resolve() -> None:
    for module in (think.models, think.testing):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
