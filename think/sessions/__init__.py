"""Sessions: what a model step sees of a conversation — the session view of the message
tree, context blocks, compaction and truncation.

Imported by `agent` and the layers above it.
"""

from think.sessions._context_blocks import ContextBlock, ContextProvider
from think.sessions._session import ContextOverflow, Proactive, Session

__all__ = ["ContextBlock", "ContextOverflow", "ContextProvider", "Proactive", "Session"]
