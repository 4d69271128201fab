"""Compaction: older turns read by the model as one summary, while storage keeps them all.

A compaction function takes a `CompactionContext` (the path as the model reads it, earlier
summaries included) and answers with a `CompactionResult`: which span of messages its summary
stands in for. The framework stores that as an overlay (`think.storage._compactions`), and
every later read *for the model* replaces the span with the summary (`apply_summaries`); reads
for people (`GET …/messages`, `ConversationHandle.messages()`) never do.

The summary reaches the model as a **user** message that says what it is (`SUMMARY_HEADER`),
not as a second system message: several providers and chat templates refuse or move a system
message that is not the first one (vLLM's templates raise, Anthropic takes only one system
prompt), and a user message works everywhere. It also leaves the system prompt alone, which
is frozen per conversation so that providers can cache it.

`create_compact_function` is the ready one: it summarises everything but the newest
`keep_recent_tokens` of history with a model, folding an earlier summary into the new one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, Field

from think._messages import UIMessage
from think._protocol import (
    PartLike,
    is_file_part,
    is_text_part,
    is_tool_part,
    joined_text,
    tool_name,
)
from think._settings import Settings
from think.exceptions import UserError
from think.models import ModelClient, ModelRequest, TextDelta, resolve_model, to_chat_messages
from think.storage import Compaction
from think.tools import maybe_await

CompactionTrigger = Literal["between_turns", "proactive", "reactive", "manual"]
"""After a turn (`compact_after`), before a step that nears the window, after a provider's
overflow error, or on demand (`ConversationHandle.compact()`)."""

TokenCounter: TypeAlias = Callable[[Sequence[dict[str, Any]]], int]
"""Tokens of a list of Chat Completions messages, as the model would count them."""

SUMMARY_HEADER = "[Summary of the earlier conversation, which is no longer shown in full]"

_IMAGE_TOKENS = 1_000
_MESSAGE_TOKENS = 4


def default_token_counter(messages: Sequence[dict[str, Any]]) -> int:
    """A tokenizer-free estimate: four characters a token (the rule of thumb for English with
    OpenAI's and Anthropic's tokenizers; code and other scripts run denser, so it errs low for
    them), plus four tokens of framing per message and a flat 1,000 per image. Give the session
    a real tokenizer (`session.token_counter(fn)`) when the estimate is not good enough."""
    total = 0
    for message in messages:
        chars = 0
        images = 0
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    chars += len(str(part.get("text", "")))
                else:
                    images += 1
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
        total += _MESSAGE_TOKENS + -(-chars // 4) + images * _IMAGE_TOKENS
    return total


class CompactionResult(BaseModel):
    """What a compaction function answers: `summary` stands in for the messages from
    `first_message_id` to `last_message_id` (ids of `CompactionContext.messages`, where an
    earlier summary counts as the span it covers: see `CompactionContext.span`)."""

    first_message_id: str = Field(min_length=1)
    last_message_id: str = Field(min_length=1)
    summary: str = Field(min_length=1)


@dataclass(frozen=True)
class CompactionContext:
    """What a compaction function works from."""

    agent: str
    conversation_id: str
    trigger: CompactionTrigger
    messages: list[UIMessage]
    """The path as the model reads it, root first: earlier summaries appear as user messages
    (`is_summary`), the messages they cover do not. The last message is the newest."""
    model: ModelClient
    """The agent's model, to summarise with when nothing else is named."""
    settings: Settings
    count_tokens: TokenCounter
    """The session's token counter (Chat Completions messages)."""
    turn_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    """Sent with summarising requests (as `x-think-*` headers)."""
    resolver: Callable[[str | ModelClient], ModelClient] | None = None
    """How `resolve_model` reaches a model (the framework's: through the agent's `get_gateway`,
    metering what it spends); None: the configured endpoints."""

    def tokens(self, messages: Sequence[UIMessage]) -> int:
        """What `messages` cost the model, by the session's counter."""
        return self.count_tokens(to_chat_messages("", list(messages)))

    def span(self, message: UIMessage) -> tuple[str, str]:
        """The stored messages `message` stands for: itself, or the span of a summary."""
        covered = (message.metadata or {}).get("compaction")
        if isinstance(covered, dict):
            return str(covered["first_message_id"]), str(covered["last_message_id"])
        return message.id, message.id

    def resolve_model(self, spec: str | ModelClient) -> ModelClient:
        """The model `spec` names, reached as the agent's `get_gateway` says (asked with
        `purpose="compaction"`), its usage counted in the conversation's."""
        if self.resolver is not None:
            return self.resolver(spec)
        return resolve_model(spec, self.settings)


CompactFunction: TypeAlias = Callable[
    [CompactionContext], "CompactionResult | Awaitable[CompactionResult | None] | None"
]
"""`(context) -> CompactionResult | None` (sync or async); None: nothing to compact."""

Summarizer: TypeAlias = str | ModelClient | Callable[[str], "str | Awaitable[str]"]
"""A model id (resolved like `get_model`'s), a `ModelClient`, or `(prompt) -> summary`."""


def is_summary(message: UIMessage) -> bool:
    return isinstance((message.metadata or {}).get("compaction"), dict)


def summary_message(compaction: Compaction | CompactionResult, id: int = 0) -> UIMessage:
    """How a summary reads for the model: a user message saying what it is."""
    if isinstance(compaction, Compaction):
        id = compaction.id
    return UIMessage.model_construct(
        id=f"compaction-{id}",
        role="user",
        parts=[{"type": "text", "text": f"{SUMMARY_HEADER}\n\n{compaction.summary}"}],
        metadata={
            "compaction": {
                "id": id,
                "first_message_id": compaction.first_message_id,
                "last_message_id": compaction.last_message_id,
            }
        },
    )


def apply_summaries(path: list[UIMessage], summaries: Sequence[Compaction]) -> list[UIMessage]:
    """`path` as the model reads it: each applicable summary replaces the span it covers.

    A summary applies when its last message is on the path. Its first message is then on the
    path too, or before the part of it that was read (which the summary then covers from the
    start). Overlapping summaries (a newer one usually folds an older one in) resolve to the
    one reaching furthest, the newest on a tie.
    """
    if not summaries:
        return path
    index = {m.id: i for i, m in enumerate(path)}
    chosen: list[tuple[int, int, Compaction]] = []
    candidates = sorted(
        (s for s in summaries if s.last_message_id in index),
        key=lambda s: (index[s.last_message_id], s.id),
        reverse=True,
    )
    for s in candidates:
        last = index[s.last_message_id]
        first = index.get(s.first_message_id, 0)
        if first > last or any(first <= b and a <= last for a, b, _ in chosen):
            continue
        chosen.append((first, last, s))
    if not chosen:
        return path
    out: list[UIMessage] = []
    starts = {first: (last, s) for first, last, s in chosen}
    i = 0
    while i < len(path):
        if i in starts:
            last, s = starts[i]
            out.append(summary_message(s))
            i = last + 1
        else:
            out.append(path[i])
            i += 1
    return out


# -- the ready compaction function ---------------------------------------------------------

SUMMARY_SYSTEM = (
    "You condense conversations between a user and an AI assistant so the assistant can carry "
    "on without the original messages. Keep every fact, name, number, identifier, file path, "
    "decision, preference, open question and promise that later turns may need, and what the "
    "tools that were called returned, briefly. Fold any earlier summary in. Write compact "
    "notes in the third person, with no preamble."
)

TOOL_OUTPUT_CHARS = 2_000
"""How much of one tool output goes into the summarising prompt (the rest is cut): outputs
this large are usually why the context overflowed in the first place."""


def create_compact_function(
    *,
    summarize: Summarizer | None = None,
    keep_recent_tokens: int = 20_000,
    system: str = SUMMARY_SYSTEM,
) -> CompactFunction:
    """A compaction function that summarises older turns with a model.

    `summarize` is a model id (`"gpt-4o-mini"`, `"cheap/gpt-4o-mini"`), a `ModelClient`, or a
    function `(prompt) -> summary` (sync or async); None uses the agent's own model. The newest
    messages worth at least `keep_recent_tokens` (by the session's token counter; at least the
    newest message) stay verbatim; everything before them, an earlier summary included,
    becomes one summary. It answers None, calling no model, when there is nothing before the
    kept messages to summarise.
    """
    if keep_recent_tokens < 0:
        raise UserError(f"keep_recent_tokens must be >= 0, not {keep_recent_tokens!r}")

    async def compact(ctx: CompactionContext) -> CompactionResult | None:
        cut = _cut(ctx, keep_recent_tokens)
        if cut is None:
            return None
        span = ctx.messages[:cut]
        prompt = "Summarise this conversation:\n\n" + render_transcript(span)
        text = (await _run_summarizer(summarize, system, prompt, ctx)).strip()
        if not text:
            return None
        return CompactionResult(
            first_message_id=ctx.span(span[0])[0],
            last_message_id=ctx.span(span[-1])[1],
            summary=text,
        )

    return compact


def _cut(ctx: CompactionContext, keep: int) -> int | None:
    """Where the kept messages begin: the latest cut whose suffix holds at least `keep` tokens,
    keeping at least the newest message. None when nothing new lies before it (a lone earlier
    summary is not worth summarising again)."""
    messages = ctx.messages
    if len(messages) < 2:
        return None
    suffix = 0
    cut = None
    for i in range(len(messages) - 1, 0, -1):
        suffix += ctx.tokens([messages[i]])
        if suffix >= keep:
            cut = i
            break
    if cut is None or (cut == 1 and is_summary(messages[0])):
        return None
    return cut


def render_transcript(messages: Sequence[UIMessage]) -> str:
    """The messages as plain text for a summarising prompt: who said what, which tools ran and
    what they returned (long outputs cut), an earlier summary as such. Reasoning is left out."""
    lines: list[str] = []
    for message in messages:
        if is_summary(message):
            text = joined_text(message.parts)
            lines.append("Earlier summary: " + text.removeprefix(SUMMARY_HEADER).strip())
            continue
        who = {"user": "User", "assistant": "Assistant"}.get(message.role, "System")
        for part in message.parts:
            line = _line(who, part)
            if line is not None:
                lines.append(line)
    return "\n".join(lines)


def _line(who: str, part: PartLike) -> str | None:
    """One part as a line of the plain-text transcript; None for what it leaves out."""
    if is_text_part(part):
        return f"{who}: {part['text']}" if str(part.get("text", "")).strip() else None
    if is_tool_part(part):
        call = f"{tool_name(part)}({_short(part.get('input'), 500)})"
        if part.get("state") == "output-available":
            return f"Tool {call} returned: {_short(part.get('output'))}"
        if part.get("state") == "output-error":
            return f"Tool {call} failed: {_short(part.get('errorText'))}"
        return f"Tool {call} did not run."
    if is_file_part(part):
        return f"{who} attached a file ({part.get('mediaType', 'unknown type')})."
    return None


def _short(value: Any, limit: int = TOOL_OUTPUT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


async def _run_summarizer(
    summarize: Summarizer | None, system: str, prompt: str, ctx: CompactionContext
) -> str:
    if summarize is None or isinstance(summarize, str | ModelClient):
        model = ctx.model if summarize is None else ctx.resolve_model(summarize)
        request = ModelRequest(
            model=model.name,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            metadata=ctx.metadata,
        )
        text: list[str] = []
        async for event in model.stream(request):
            if isinstance(event, TextDelta):
                text.append(event.delta)
        return "".join(text)
    return str(await maybe_await(summarize(prompt)))
