"""The system prompt a model step sends when the agent declares context blocks: the frozen
one, rebuilt when it must be, and reminders of changed "remind" blocks after it.

The rules (see `think.sessions._context_blocks`): a conversation's first model step builds
the prompt from the agent's instructions and every block's current content and stores it
with the fingerprints of those contents. Later steps send it as stored. A turn's first step
rebuilds it when a memory block without `when_changed` was written since (so what the model
saved is in the next turn's prompt), and any step rebuilds it when it was dropped
(`rebuild_system_prompt()`, compaction). Otherwise each "remind" block whose content differs
from the frozen one comes as a reminder. Providers run here, in the model-step activity,
outside any transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from think.agent import Think
from think.engine.activities._assembly import HookFailed, overrides
from think.sessions import ContextBlock, fingerprint, read_block, reminder, render_prompt
from think.storage import PromptState, Store, TurnRecord, freeze_prompt, prompt_state

_EMPTY = fingerprint("")


@dataclass
class PromptSetup:
    """The system prompt of one step, and the reminders that follow the transcript."""

    system: str
    reminders: list[dict[str, Any]] = field(default_factory=list)


async def step_prompt(
    agent: Think, turn: TurnRecord, step: int, store: Store
) -> PromptSetup | None:
    """None for an agent without context blocks: it sends `get_system_prompt()` as it is.
    Raises `HookFailed` (stage `context`) when `configure_context` or a provider raises."""
    try:
        blocks = agent.context_blocks()
        if not blocks:
            return None
        async with store.db.connection() as conn:
            state = await prompt_state(conn, turn.conversation_uid)
        if _needs_rebuild(blocks, state, step):
            contents = {b.label: await read_block(b, state.memory) for b in blocks}
            instructions = (
                agent.get_system_prompt() if overrides(agent, "get_system_prompt") else ""
            )
            system = render_prompt(instructions, blocks, contents)
            frozen = {label: fingerprint(content) for label, content in contents.items()}
            async with store.db.transaction() as conn:
                await freeze_prompt(conn, turn.conversation_uid, system, frozen)
            return PromptSetup(system)
        assert state.system_prompt is not None
        changed: list[tuple[ContextBlock, str]] = []
        for block in blocks:
            if block.when_changed == "remind":
                content = await read_block(block, state.memory)
                if fingerprint(content) != state.frozen.get(block.label, _EMPTY):
                    changed.append((block, content))
    except Exception as exc:
        raise HookFailed("context", exc) from exc
    return PromptSetup(state.system_prompt, [reminder(changed)] if changed else [])


def _needs_rebuild(blocks: list[ContextBlock], state: PromptState, step: int) -> bool:
    if state.system_prompt is None:
        return True
    if step > 0:
        return False  # the prompt stays as it is for the whole turn
    return any(
        b.writable
        and b.when_changed is None
        and fingerprint(state.memory.get(b.label, "")) != state.frozen.get(b.label, _EMPTY)
        for b in blocks
    )
