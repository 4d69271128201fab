"""Built-in tools an agent may add to `get_tools()`.

    from think.tools import search_history

    class Archivist(Think):
        def get_tools(self) -> list[Tool]:
            return [search_history]

`search_history` lets the model search its own conversation (every branch, including what
compaction, truncation or the hydration budget keep out of its context) through the same
full-text search as `GET …/search`. It runs in the tool activity, on the conversation of the
turn it serves; a conversation never sees another's messages.
"""

from __future__ import annotations

import html
import re

from think._current import BOUND
from think.exceptions import ToolError, UserError
from think.storage import MAX_SEARCH_LIMIT, search_messages
from think.tools._tool import tool

__all__ = ["search_history"]

_MARK = re.compile(r"</?mark>")


@tool
async def search_history(query: str, limit: int = 5) -> list[dict[str, str]]:
    """Search the earlier messages of this conversation, including those no longer in view.

    Best matches first, each with its role and the words around the match (matches in
    **bold**).

    Args:
        query: Words to look for; "quotes" for an exact phrase, a leading - to exclude a word.
        limit: How many matches to return, 1 to 20.
    """
    if not 1 <= limit <= min(20, MAX_SEARCH_LIMIT):
        raise ToolError(f"limit must be between 1 and 20, not {limit}")
    binding = BOUND.get()
    if binding is None:
        raise UserError("search_history runs only inside a turn, on a worker")
    turn = await binding.turn()
    hits = await search_messages(
        binding.service.store.db, turn.conversation_uid, query, limit=limit
    )
    return [
        {"message_id": hit.message_id, "role": hit.role, "snippet": _plain(hit.snippet)}
        for hit in hits
    ]


def _plain(snippet: str) -> str:
    """A search snippet (escaped HTML with `<mark>` around the matches) as plain text with the
    matches in **bold**; the escaped text's own `&lt;mark&gt;` stays text."""
    return html.unescape(_MARK.sub("**", snippet))
