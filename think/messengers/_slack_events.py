"""What Slack POSTs to the webhook, verified and read: the Events API and interactivity.

Verification is Slack's signing secret (`slack_sdk`'s `SignatureVerifier`): the HMAC of
`v0:{timestamp}:{body}` in `X-Slack-Signature`, and `X-Slack-Request-Timestamp` within five
minutes of now, so a captured request replayed later is refused like a forged one.

Three kinds of body reach the route, and `read_slack` tells them apart:

- `url_verification` (JSON): Slack checks the Request URL; answered with its `challenge`.
- `event_callback` (JSON): one event, keyed by `event_id` (Slack retries an event it did not
  see answered within 3 s, with `X-Slack-Retry-Num`; the key makes the retry a no-op).
  `message` in a DM (`channel_type` `im`), `app_mention` anywhere, and a plain `message` in a
  channel thread (for a subscribed thread) become a `SlackMessage`; a bot's message, a
  message subtype other than `file_share` (edits, deletions, joins) and our own words are
  ignored, so the bot never answers itself.
- `block_actions` (form-encoded `payload=`): a button pressed, here Approve or Deny.

Threads: a message's thread is its `thread_ts`, or its own `ts` when it starts one, as Slack
shows a reply posted with `thread_ts` set; each thread is its own conversation.
"""

import html
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import parse_qs

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from slack_sdk.signature import Clock, SignatureVerifier

SLACK_REPLAY_WINDOW = 300
"""Seconds either side of now a request's timestamp may be (Slack's own five minutes)."""

_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#[A-Z0-9]+\|([^>]*)>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")


class SlackRequestError(ValueError):
    """A verified body that is not one of Slack's shapes; answered 400, nothing stored."""


def verify_slack(
    body: bytes, headers: Mapping[str, str], signing_secret: str, clock: Clock | None = None
) -> bool:
    """Whether `body` was signed by Slack with `signing_secret`, within the replay window.

    False (never an exception) for a missing, malformed or stale timestamp, a missing or
    wrong signature: the route answers 401 to all of them alike.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    timestamp = lower.get("x-slack-request-timestamp", "")
    signature = lower.get("x-slack-signature", "")
    if not timestamp.isdigit() or not signature:
        return False
    verifier = SignatureVerifier(signing_secret, clock or Clock())
    return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SlackFile(_Loose):
    """A file shared with a message: fetched from `url_private` with the bot token."""

    id: str
    name: str | None = None
    mimetype: str | None = None
    size: int | None = None
    url_private: str | None = None
    url_private_download: str | None = None


class _Event(_Loose):
    type: str
    subtype: str | None = None
    channel: str | None = None
    channel_type: str | None = None
    user: str | None = None
    bot_id: str | None = None
    text: str = ""
    ts: str | None = None
    thread_ts: str | None = None
    files: list[SlackFile] = Field(default_factory=list)


class _Authorization(_Loose):
    user_id: str | None = None
    is_bot: bool = False


class _Callback(_Loose):
    type: Literal["event_callback"]
    event_id: str
    team_id: str | None = None
    event: _Event
    authorizations: list[_Authorization] = Field(default_factory=list)


class SlackChallenge(BaseModel):
    """`url_verification`: answer `{"challenge": ...}` and nothing else."""

    kind: Literal["challenge"] = "challenge"
    challenge: str


class SlackIgnored(BaseModel):
    """A verified body that asks for nothing (a bot's message, an edit, an unknown event)."""

    kind: Literal["ignored"] = "ignored"
    key: str | None = None
    reason: str


class SlackMessage(BaseModel):
    """A person's message that may reach the model, normalised."""

    kind: Literal["message"] = "message"
    key: str
    """`event_id`: the idempotency key of the ingestion."""
    team: str | None
    channel: str
    channel_type: str
    """`im` (a DM), `mpim`, `channel` or `group`."""
    thread_ts: str
    """The thread the reply goes to, and the conversation: `thread_ts` or the message's `ts`."""
    ts: str
    user: str
    text: str
    """Plain text: mentions of the bot dropped, entities decoded, links as their URL."""
    mentioned: bool
    """An `app_mention`: routed by default, and it subscribes its thread."""
    in_thread: bool
    """A reply inside an existing thread (not its first message)."""
    files: list[SlackFile] = Field(default_factory=list)

    @property
    def direct(self) -> bool:
        return self.channel_type == "im"

    @property
    def thread_key(self) -> str:
        return f"{self.channel}:{self.thread_ts}"


class SlackAction(BaseModel):
    """A button pressed on one of our messages (`block_actions`)."""

    kind: Literal["action"] = "action"
    key: str
    """`action_ts` and the presser: a press is one decision, whatever Slack redelivers."""
    team: str | None
    channel: str
    message_ts: str
    thread_ts: str
    user: str
    user_name: str | None
    action_id: str
    value: str
    response_url: str | None
    shown: str = ""
    """The pressed message's words (its section blocks' mrkdwn), to keep when it is settled."""


SlackInbound = SlackChallenge | SlackIgnored | SlackMessage | SlackAction


def read_slack(body: bytes, content_type: str, bot_user_id: str | None = None) -> SlackInbound:
    """A verified body as what it asks for; `SlackRequestError` for a body of no known shape."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"))
        raw = form.get("payload", [""])[0]
        return _interaction(_json(raw.encode()))
    payload = _json(body)
    match payload.get("type"):
        case "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                raise SlackRequestError("url_verification without a string 'challenge'")
            return SlackChallenge(challenge=challenge)
        case "event_callback":
            try:
                callback = _Callback.model_validate(payload)
            except ValidationError as exc:
                raise SlackRequestError(f"an event_callback Slack would not send: {exc}") from exc
            return _event(callback, bot_user_id)
        case other:
            return SlackIgnored(reason=f"request type {other!r} is not handled")


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SlackRequestError(f"the body is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise SlackRequestError("the body is not a JSON object")
    return value


def _event(callback: _Callback, bot_user_id: str | None) -> SlackInbound:
    event, key = callback.event, callback.event_id
    bot = bot_user_id or next(
        (a.user_id for a in callback.authorizations if a.is_bot and a.user_id), None
    )
    if event.bot_id is not None or (bot is not None and event.user == bot):
        return SlackIgnored(key=key, reason="a bot's message (never answer ourselves)")
    if event.subtype not in (None, "file_share", "thread_broadcast"):
        return SlackIgnored(key=key, reason=f"message subtype {event.subtype!r}")
    if event.type not in ("message", "app_mention"):
        return SlackIgnored(key=key, reason=f"event type {event.type!r} is not handled")
    if not (event.channel and event.user and event.ts):
        return SlackIgnored(key=key, reason="an event without channel, user or ts")
    mentioned = event.type == "app_mention"
    channel_type = event.channel_type or ("im" if event.channel.startswith("D") else "channel")
    if (
        event.type == "message"
        and channel_type != "im"
        and bot is not None
        and f"<@{bot}" in event.text
    ):
        # Slack sends the app_mention too: that one is the event that reaches the model.
        return SlackIgnored(key=key, reason="a mention's message twin")
    in_thread = event.thread_ts is not None and event.thread_ts != event.ts
    if not mentioned and channel_type != "im" and not in_thread:
        # A channel's top-level message that does not mention the bot starts a thread of
        # its own, which nothing has subscribed: it can reach no one, so nothing is stored.
        return SlackIgnored(key=key, reason="a channel message outside any thread, unaddressed")
    return SlackMessage(
        key=key,
        team=callback.team_id,
        channel=event.channel,
        channel_type=channel_type,
        thread_ts=event.thread_ts or event.ts,
        ts=event.ts,
        user=event.user,
        text=plain_text(event.text, bot),
        mentioned=mentioned,
        in_thread=in_thread,
        files=event.files,
    )


def plain_text(text: str, bot_user_id: str | None) -> str:
    """Slack's message text as a model reads it: our mention dropped, others as `@U123`."""

    def mention(match: re.Match[str]) -> str:
        return "" if match.group(1) == bot_user_id else f"@{match.group(1)}"

    text = _MENTION.sub(mention, text)
    text = _LINK.sub(
        lambda m: m.group(1) if not m.group(2) else f"{m.group(2)} ({m.group(1)})", text
    )
    text = _CHANNEL.sub(lambda m: f"#{m.group(1)}", text)
    text = _SPECIAL.sub(lambda m: f"@{m.group(1)}", text)
    return html.unescape(text).strip()


class _User(_Loose):
    id: str
    username: str | None = None
    name: str | None = None


class _Container(_Loose):
    channel_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None


class _Channel(_Loose):
    id: str


class _ActionMessage(_Loose):
    ts: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = Field(default_factory=list)


class _Action(_Loose):
    action_id: str
    value: str = ""
    action_ts: str = ""


class _Interaction(_Loose):
    type: str
    team: dict[str, Any] | None = None
    user: _User
    channel: _Channel | None = None
    container: _Container = Field(default_factory=_Container)
    message: _ActionMessage | None = None
    actions: list[_Action] = Field(default_factory=list)
    response_url: str | None = None


def _interaction(payload: dict[str, Any]) -> SlackInbound:
    try:
        interaction = _Interaction.model_validate(payload)
    except ValidationError as exc:
        raise SlackRequestError(f"an interaction payload Slack would not send: {exc}") from exc
    if interaction.type != "block_actions" or not interaction.actions:
        return SlackIgnored(reason=f"interaction {interaction.type!r} is not handled")
    action = interaction.actions[0]
    channel = interaction.channel.id if interaction.channel else interaction.container.channel_id
    message_ts = interaction.message.ts if interaction.message else interaction.container.message_ts
    if channel is None or message_ts is None:
        return SlackIgnored(reason="a block action on no message")
    thread_ts = (
        (interaction.message.thread_ts if interaction.message else None)
        or interaction.container.thread_ts
        or message_ts
    )
    team = interaction.team.get("id") if interaction.team else None
    return SlackAction(
        key=f"action:{message_ts}:{action.action_ts}:{interaction.user.id}",
        team=team if isinstance(team, str) else None,
        channel=channel,
        message_ts=message_ts,
        thread_ts=thread_ts,
        user=interaction.user.id,
        user_name=interaction.user.username or interaction.user.name,
        action_id=action.action_id,
        value=action.value,
        response_url=interaction.response_url,
        shown=_sections(interaction.message.blocks if interaction.message else []),
    )


def _sections(blocks: list[dict[str, Any]]) -> str:
    """The mrkdwn of a message's section blocks, in order."""
    texts = []
    for block in blocks:
        text = block.get("text") if block.get("type") == "section" else None
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            texts.append(text["text"])
    return "\n".join(texts)
