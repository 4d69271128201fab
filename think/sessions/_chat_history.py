"""The transcript a model step reads, as the Chat Completions messages it is sent as: kept per
conversation, so that a step converts only what changed since the conversation's last step.

Every step sends the model the whole path. At turn 1,000 of a tool conversation that is about
2,000 stored messages and 4,000 chat messages, and evicting media
(`think.sessions._eviction`), cutting older messages (`think.sessions._truncation`) and
converting (`think.models._transcript`) all of them again took about 4 ms a step, even with
each message's result cached, so turn 1,000 was slower than turn 1.

What a message becomes depends only on the message and on which side of two cut-offs it
stands (eviction's and truncation's), and both move in steps of `truncation_step` messages.
So a step's history is the last step's, with the new messages converted and those that just
crossed a cut-off converted again: the path is compared by identity (`think.storage.PathCache`
hands each step the same message objects), and the chat messages the last step sent are
reused up to the first message converted again.

A conversion that called the agent's `repair_interrupted_tool_part` is made again on every
step, as `to_chat_messages` does: the repair is the agent's to decide each time. The chat
messages are shared by the steps that read them: nothing may change them (the hooks are
handed copies by their pydantic contexts).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from think._messages import UIMessage
from think.models import Repair, converted
from think.sessions._eviction import (
    Evicted,
    MediaEviction,
    evict_message,
    eviction_cutoff,
)
from think.sessions._truncation import cut_message, cutoff

Settings = tuple[MediaEviction | None, int | float | None]
"""What a history was made with: the eviction settings and the truncation step."""


@dataclass(frozen=True)
class _History:
    settings: Settings
    source: list[UIMessage]
    """The transcript it was made from."""
    chats: list[list[dict[str, Any]]]
    """What each message of `source` became."""
    evicted: int
    """Eviction's cut-off: the messages before it lost their media."""
    cut: int
    """Truncation's cut-off."""
    repaired: tuple[int, ...]
    """The messages whose conversion called the agent's repair: converted again each step."""
    flat: list[dict[str, Any]]
    """`chats`, joined: what the step sent."""
    starts: list[int]
    """Where each message's chat messages start in `flat` (and, last, its length)."""
    json: bytes
    """`chats` as JSON: each chat message's object followed by a comma."""
    offsets: list[int]
    """Where each message's JSON starts in `json` (and, last, its length)."""


@dataclass(frozen=True)
class ChatHistory:
    """A step's history, to be kept (`ChatHistories.keep`) once what it evicted is
    preserved."""

    conversation_uid: str
    messages: list[dict[str, Any]]
    """The Chat Completions messages, shared with later steps: never change them."""
    json: bytes
    """`messages` as JSON: their objects joined by commas, without brackets."""
    evicted: list[Evicted]
    """The media evicted here for the first time, to preserve in the workspace."""
    state: _History


class ChatHistories:
    """One worker's histories, one per conversation, least recently used out first."""

    def __init__(self, max_messages: int = 500_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        """`max_messages`: the transcript messages held in all (each holds no more than
        references to conversions that `think.models._transcript` caches anyway).
        `max_bytes`: the histories' JSON, in all; a history over an eighth of it is not kept
        (its conversation's steps convert it whole, as a cold worker's would). Counting
        messages alone, one history with a 14 MiB tool call held its JSON, its conversion and
        its transcript, 43 MB of a worker, for as long as 500,000 messages did not push it
        out (docs/benchmarks.md, "A large workspace write")."""
        self._histories: OrderedDict[str, _History] = OrderedDict()
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._messages = 0
        self._bytes = 0
        self.converted = 0
        """Messages converted (again) so far: what a step costs, in messages."""

    def convert(
        self,
        conversation_uid: str,
        transcript: list[UIMessage],
        *,
        eviction: MediaEviction | None,
        truncation_step: int | float | None,
        repair: Repair,
    ) -> ChatHistory:
        """What `to_chat_messages` makes of `transcript` once its media is evicted and its
        older messages cut (`evict`, then `truncate`). Nothing is kept until `keep`: what
        `repair` raises propagates, and the next step converts again."""
        count = len(transcript)
        settings: Settings = (eviction, truncation_step)
        evicted = eviction_cutoff(count, eviction, truncation_step) if eviction else 0
        cut = cutoff(count, truncation_step)
        last = self._histories.get(conversation_uid)
        same = _common(last.source, transcript) if last and last.settings == settings else 0
        chats: list[list[dict[str, Any]]]
        encoded: list[bytes | None]  # each message's JSON where converted; None: as last step's
        again: list[int]
        if last is None or same == 0:
            chats, again = [], list(range(count))
        else:
            chats = last.chats[:same]
            # Those that crossed a cut-off (either way: a shorter path moves it back), those
            # the agent repaired, and the new ones.
            crossed = {
                *range(min(evicted, last.evicted), min(max(evicted, last.evicted), same)),
                *range(min(cut, last.cut), min(max(cut, last.cut), same)),
                *(i for i in last.repaired if i < same),
            }
            again = [*sorted(crossed), *range(same, count)]
        chats.extend([] for _ in range(count - len(chats)))
        encoded = [None] * count
        payloads: list[Evicted] = []
        repaired: list[int] = []
        for i in again:
            message = transcript[i]
            if i < evicted:
                assert eviction is not None
                message, taken = evict_message(message, eviction.min_part_bytes)
                payloads += taken
            if i < cut:
                message = cut_message(message)
            chats[i], called = converted(message, repair)
            encoded[i] = b"".join(orjson.dumps(chat) + b"," for chat in chats[i])
            if called:
                repaired.append(i)
        self.converted += len(again)
        # What the last step sent, up to the first message converted again, then the rest.
        first = again[0] if again else count
        flat: list[dict[str, Any]] = []
        starts: list[int] = []
        head, offsets = b"", []
        if last is not None and first > 0:
            flat, starts = last.flat[: last.starts[first]], last.starts[:first]
            head, offsets = last.json[: last.offsets[first]], last.offsets[:first]
        joined, at = [head], len(head)
        for i in range(first, count):
            text = encoded[i]
            if text is None:  # kept, between two converted again
                assert last is not None
                text = last.json[last.offsets[i] : last.offsets[i + 1]]
            starts.append(len(flat))
            flat += chats[i]
            offsets.append(at)
            joined.append(text)
            at += len(text)
        starts.append(len(flat))
        offsets.append(at)
        json = b"".join(joined)
        history = _History(
            settings,
            list(transcript),
            chats,
            evicted,
            cut,
            tuple(repaired),
            flat,
            starts,
            json,
            offsets,
        )
        # The last comma off.
        return ChatHistory(conversation_uid, list(flat), json[:-1], payloads, history)

    def keep(self, made: ChatHistory) -> None:
        """Keep `made` for the conversation's next step: once its evicted media is in the
        workspace (`preserve`), since a message evicted here is not evicted again."""
        conversation_uid, history = made.conversation_uid, made.state
        old = self._histories.pop(conversation_uid, None)
        if old is not None:
            self._messages -= len(old.source)
            self._bytes -= len(old.json)
        if len(history.json) > self._max_bytes // 8:
            return
        self._histories[conversation_uid] = history
        self._messages += len(history.source)
        self._bytes += len(history.json)
        while (
            self._messages > self._max_messages or self._bytes > self._max_bytes
        ) and self._histories:
            _, dropped = self._histories.popitem(last=False)
            self._messages -= len(dropped.source)
            self._bytes -= len(dropped.json)


def _common(last: list[UIMessage], transcript: list[UIMessage]) -> int:
    """How many messages `transcript` starts with that `last` started with too."""
    shorter = min(len(last), len(transcript))
    if last[:shorter] == transcript[:shorter]:  # in C; `is` first, so equal by identity
        return shorter
    return next(
        (i for i, (a, b) in enumerate(zip(last, transcript, strict=False)) if a != b), shorter
    )
