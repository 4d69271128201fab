"""Sessions: what a model step sees of a conversation — the session view of the message
tree, context blocks, compaction and truncation.

Imported by `agent` and the layers above it.
"""

from think.sessions._chat_history import ChatHistories
from think.sessions._compaction import (
    CompactionContext,
    CompactionResult,
    CompactionTrigger,
    apply_summaries,
    create_compact_function,
    default_token_counter,
    is_summary,
    summary_message,
)
from think.sessions._context_blocks import (
    ContextBlock,
    ContextProvider,
    check_write,
    checked_blocks,
    fingerprint,
    read_block,
    reminder,
    render_prompt,
    set_context_tool,
)
from think.sessions._eviction import MediaEviction, eviction_settings, preserve
from think.sessions._session import ContextOverflow, Proactive, Session, session_for
from think.sessions._truncation import check_step

__all__ = [
    "ChatHistories",
    "CompactionContext",
    "CompactionResult",
    "CompactionTrigger",
    "ContextBlock",
    "ContextOverflow",
    "ContextProvider",
    "MediaEviction",
    "Proactive",
    "Session",
    "apply_summaries",
    "check_step",
    "check_write",
    "checked_blocks",
    "create_compact_function",
    "default_token_counter",
    "eviction_settings",
    "fingerprint",
    "is_summary",
    "preserve",
    "read_block",
    "reminder",
    "render_prompt",
    "session_for",
    "set_context_tool",
    "summary_message",
]
