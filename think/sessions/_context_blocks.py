"""Context blocks: what `Think.configure_context()` adds to the system prompt.

A block is a labelled piece of the system prompt. One with a `provider` is read from it; one
without is the conversation's own memory, kept in Postgres (`context_blocks`) and written by
the model through the built-in `set_context` tool (or from Python, `ConversationHandle.
set_context`), within its `max_tokens`.

The system prompt is assembled from `get_system_prompt()` and the blocks once, stored with the
conversation (`conversations.system_prompt`) and sent byte for byte on every later step, so a
provider's prompt cache keeps hitting. It is rebuilt (`think.engine.activities._system_prompt`):

- when the conversation has none yet (its first model step);
- at the first step of a turn, when a memory block without `when_changed` was written since;
- after `rebuild_system_prompt()` (on the agent inside a turn, or on a `ConversationHandle`),
  and after compaction: the next model step builds it again.

A provider block that changes meanwhile does not change the prompt until that rebuild, unless
it is `when_changed="remind"`: then the model reads its new content in a reminder after the
cached prefix (a user message after the newest one, never stored), on every step until the
next rebuild folds it in. A memory block declared with `when_changed="remind"` is announced
the same way when written, instead of asking for a rebuild.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from think._current import BOUND
from think.exceptions import ToolError, UserError
from think.storage import write_memory
from think.tools import Tool, maybe_await

SET_CONTEXT = "set_context"
"""The built-in tool that writes memory blocks, added when an agent declares one."""

_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ContextProvider(Protocol):
    """What a block reads its content from: `get()`, sync or async, returning text."""

    def get(self) -> str | Awaitable[str | None] | None: ...


Provider: TypeAlias = ContextProvider | Callable[[], str | Awaitable[str | None] | None]
"""An object with `get()`, or a function of no arguments (a bound method of the agent, say)."""


@dataclass(frozen=True)
class ContextBlock:
    """One block of the system prompt.

    `label` names it (letters, digits, `_`, `-`); `description` tells the model what it holds.
    With a `provider` (an object with `get()` or a function, sync or async, returning text),
    the block is read from it; it runs on a worker inside the turn, so the agent's
    `get_config()` and `think.current_conversation()` work there. Without one, the block is
    memory the model writes through `set_context`, kept with the conversation, at most
    `max_tokens` long (None: no limit). `when_changed="remind"` sends a changed block to the
    model as a reminder after the cached prompt instead of waiting for the next rebuild.
    """

    label: str
    description: str = ""
    max_tokens: int | None = None
    provider: Provider | None = None
    when_changed: Literal["remind"] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not _LABEL.match(self.label):
            raise UserError(
                f"context block label {self.label!r} must be 1 to 64 letters, digits, '_' or '-'"
            )
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise UserError(
                f"context block {self.label!r}: max_tokens={self.max_tokens!r} must be a "
                "positive whole number, or None for no limit"
            )
        if self.when_changed not in (None, "remind"):
            raise UserError(
                f"context block {self.label!r}: when_changed={self.when_changed!r} must be "
                "None or 'remind'"
            )
        if self.provider is not None and not (
            callable(getattr(self.provider, "get", None)) or callable(self.provider)
        ):
            raise UserError(
                f"context block {self.label!r}: the provider {self.provider!r} must have a "
                "get() method or be a function"
            )

    @property
    def writable(self) -> bool:
        """A memory block: no provider, written through `set_context`."""
        return self.provider is None


def checked_blocks(blocks: Sequence[ContextBlock]) -> list[ContextBlock]:
    """`configure_context()`'s answer, checked: blocks with distinct labels."""
    out = list(blocks)
    labels = [b.label for b in out if isinstance(b, ContextBlock)]
    if len(labels) != len(out):
        raise UserError(f"configure_context() must return ContextBlocks, not {out!r}")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise UserError(f"configure_context(): the label {repeated[0]!r} is used twice")
    return out


def estimate_tokens(text: str) -> int:
    """A model-independent estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


def fingerprint(content: str) -> str:
    """What is stored of a block's content in the frozen prompt: enough to see it changed."""
    return hashlib.sha256(content.encode()).hexdigest()


async def read_block(block: ContextBlock, memory: dict[str, str]) -> str:
    """A block's current content: its provider's answer, or its stored memory."""
    if block.provider is None:
        return memory.get(block.label, "")
    provider: Any = block.provider
    getter = getattr(provider, "get", None)
    value = await maybe_await(getter() if callable(getter) else provider())
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(
            f"the provider of context block {block.label!r} returned {value!r}; it must "
            "return a str (or None for nothing)"
        )
    return value


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("\n", " ")


def render_block(block: ContextBlock, content: str) -> str:
    attributes = [f'label="{block.label}"']
    if block.description:
        attributes.append(f'description="{_attribute(block.description)}"')
    if block.writable:
        limit = f" of {block.max_tokens}" if block.max_tokens else ""
        attributes.append(f'tokens="{estimate_tokens(content)}{limit}"')
        attributes.append(f'writable_with="{SET_CONTEXT}"')
    return f"<context_block {' '.join(attributes)}>\n{content}\n</context_block>"


def render_prompt(
    instructions: str, blocks: Sequence[ContextBlock], contents: dict[str, str]
) -> str:
    """The system prompt: the agent's instructions, then every block that has content."""
    sections = [instructions] if instructions else []
    sections += [render_block(b, contents[b.label]) for b in blocks if contents.get(b.label)]
    return "\n\n".join(sections)


def reminder(changed: Sequence[tuple[ContextBlock, str]]) -> dict[str, Any]:
    """The message that brings changed "remind" blocks to the model after the cached prefix."""
    blocks = "\n\n".join(render_block(block, content) for block, content in changed)
    return {
        "role": "user",
        "content": (
            "<system-reminder>\nThese context blocks changed since the system prompt was "
            f"written; this is their current content:\n\n{blocks}\n</system-reminder>"
        ),
    }


def check_write(blocks: Sequence[ContextBlock], label: str, content: str) -> str | None:
    """Why `content` cannot be written to the memory block `label`, or None when it can."""
    writable = {b.label: b for b in blocks if b.writable}
    block = writable.get(label)
    if block is None:
        names = ", ".join(repr(name) for name in writable) or "none"
        return f"there is no memory block {label!r}; the blocks you can write are: {names}"
    tokens = estimate_tokens(content)
    if block.max_tokens is not None and tokens > block.max_tokens:
        return (
            f"the content is about {tokens} tokens, but the block {label!r} holds at most "
            f"{block.max_tokens}: shorten it (keep what matters most) and write it again"
        )
    return None


class _SetContext:
    """Write one of your memory blocks.

    Args:
        label: The block to write.
        content: Its new content, in full: it replaces what the block held.
    """

    def __init__(self, blocks: tuple[ContextBlock, ...]) -> None:
        self.blocks = blocks

    async def __call__(self, label: str, content: str) -> str:
        problem = check_write(self.blocks, label, content)
        if problem is not None:
            raise ToolError(problem)
        binding = BOUND.get()
        if binding is None:
            raise UserError("set_context runs only inside a turn, on a worker")
        turn = await binding.turn()
        store = binding.service.store
        async with store.db.transaction() as conn:
            await write_memory(conn, turn.conversation_uid, label, content)
        block = next(b for b in self.blocks if b.label == label)
        limit = f" of {block.max_tokens}" if block.max_tokens else ""
        when = (
            "in a reminder from your next step on"
            if block.when_changed == "remind"
            else "in your system prompt from the next turn on"
        )
        tokens = estimate_tokens(content)
        return f"Saved {label!r} ({tokens}{limit} tokens); you will see it {when}."


def set_context_tool(blocks: Sequence[ContextBlock]) -> Tool | None:
    """The `set_context` tool for these blocks' memory blocks (None when there are none)."""
    writable = tuple(
        ContextBlock(b.label, b.description, b.max_tokens, None, b.when_changed)
        for b in blocks
        if b.writable
    )
    return _set_context_tool(writable) if writable else None


@functools.lru_cache(maxsize=256)
def _set_context_tool(blocks: tuple[ContextBlock, ...]) -> Tool:
    listed = "\n".join(
        f"- {b.label!r}"
        + (f" (at most {b.max_tokens} tokens)" if b.max_tokens else "")
        + (f": {b.description}" if b.description else "")
        for b in blocks
    )
    return Tool(
        _SetContext(blocks),
        name=SET_CONTEXT,
        description=(
            "Replace the whole content of one of your memory blocks. They are kept with this "
            "conversation and shown in your system prompt; write what is worth remembering, "
            f"concisely. The blocks:\n{listed}"
        ),
    )
