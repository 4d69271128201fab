"""A conversation's frozen system prompt and memory blocks (what `configure_context()`'s
blocks hold; the rules are `think.engine.activities._system_prompt`'s).

- `conversations.system_prompt`: the system prompt as assembled from the agent's instructions
  and context blocks, sent byte for byte on every step until it is rebuilt; NULL asks the next
  model step to build it (`clear_system_prompt`, after compaction or on request).
- `context_blocks` (migration 0006), one row per block label: `content`, what the model wrote
  to a memory block through `set_context`; `frozen`, the fingerprint of the content the frozen
  prompt was built with, which tells a changed block from an unchanged one.

Every write is idempotent: a retried activity writes the same values again.
"""

from __future__ import annotations

from psycopg.types.json import Jsonb
from pydantic import BaseModel

from think.storage._db import Conn, fetch_one


class PromptState(BaseModel):
    """What a model step needs to reuse, or rebuild, the frozen system prompt."""

    system_prompt: str | None
    memory: dict[str, str]
    """Memory block contents by label, for the blocks ever written."""
    frozen: dict[str, str]
    """Fingerprints of the block contents the frozen prompt was built with, by label."""


_PROMPT_STATE = """
    SELECT c.system_prompt,
           (SELECT coalesce(jsonb_object_agg(b.label, jsonb_build_array(b.content, b.frozen)),
                            '{}')
            FROM context_blocks b WHERE b.conversation_uid = c.uid) AS blocks
    FROM conversations c WHERE c.uid = %(c)s
"""

_FREEZE_BLOCKS = """
    INSERT INTO context_blocks (conversation_uid, label, frozen)
    SELECT %(c)s, f.key, f.value FROM jsonb_each_text(%(frozen)s) AS f
    ON CONFLICT (conversation_uid, label) DO UPDATE SET frozen = EXCLUDED.frozen
"""

_WRITE_MEMORY = """
    INSERT INTO context_blocks (conversation_uid, label, content)
    VALUES (%(c)s, %(label)s, %(content)s)
    ON CONFLICT (conversation_uid, label)
    DO UPDATE SET content = EXCLUDED.content, updated_at = now()
"""


async def prompt_state(conn: Conn, conversation_uid: str) -> PromptState:
    row = await fetch_one(conn, _PROMPT_STATE, {"c": conversation_uid})
    blocks: dict[str, list[str | None]] = row["blocks"] if row else {}
    return PromptState(
        system_prompt=row["system_prompt"] if row else None,
        memory={label: v[0] for label, v in blocks.items() if v[0] is not None},
        frozen={label: v[1] for label, v in blocks.items() if v[1] is not None},
    )


async def freeze_prompt(
    conn: Conn, conversation_uid: str, system_prompt: str, frozen: dict[str, str]
) -> None:
    """Store a freshly built system prompt with the fingerprints of the blocks in it."""
    await conn.execute(
        "UPDATE conversations SET system_prompt = %(p)s WHERE uid = %(c)s",
        {"c": conversation_uid, "p": system_prompt},
    )
    await conn.execute(_FREEZE_BLOCKS, {"c": conversation_uid, "frozen": Jsonb(frozen)})


async def clear_system_prompt(conn: Conn, conversation_uid: str) -> None:
    """Drop the frozen system prompt: the conversation's next model step builds it again, from
    the agent's instructions and the blocks' current content."""
    await conn.execute(
        "UPDATE conversations SET system_prompt = NULL WHERE uid = %(c)s", {"c": conversation_uid}
    )


async def write_memory(conn: Conn, conversation_uid: str, label: str, content: str) -> None:
    """Replace the content of a memory block (checked against its limits by the caller)."""
    await conn.execute(_WRITE_MEMORY, {"c": conversation_uid, "label": label, "content": content})


async def read_memory(conn: Conn, conversation_uid: str) -> dict[str, str]:
    """The memory blocks written so far, by label."""
    return (await prompt_state(conn, conversation_uid)).memory
