"""The platform seam: what a chat platform (Telegram, Slack, ...) must provide for Think's
messenger core to receive its webhooks and deliver replies on it. The core (webhook route,
admission, delivery state machine, approvals, attachments) is platform-neutral and talks to
a platform only through `Platform`; adding a platform is implementing this protocol and a
`Messenger` subclass whose `client()` returns it and whose `secret_env()` names the variable
holding its verification secret (`think.messengers._telegram` is the worked example), and
exporting the subclass from `think.messengers` (and `think`).

How the core uses a platform, in order:

1. The webhook route calls `verify(headers, body)` before anything else; False answers 401
   and stores nothing.
2. `await parse(body)` turns the request into one of: `Challenge` (answer the platform's handshake
   with its value, e.g. Slack's `url_verification`), `Ignored` (200, nothing stored: a bot's
   own message, an edit, an event kind we do not handle), or an `InboundEvent`.
3. The event's `event_id` is deduplicated per (agent, messenger): a known id answers 200 and
   changes nothing. It is also the turn's idempotency key, so a platform retry of a request
   whose answer was lost admits nothing twice.
4. Routing (`respond_to`) reads `is_dm`, `mentions_bot`, the thread's subscription and
   `button`; a routed message becomes a turn in the conversation of `thread` (see
   `ThreadRef`), its text prefixed by the speaker's label in group chats. A button whose
   `data` is `a:<approval id>` or `d:<approval id>` is an approval's (the core posts them so
   through `send_buttons`): it is decided, never routed; the platform need only carry `data`
   back unchanged (Telegram `callback_data`, Slack a block action's `value`).
5. Delivery (a Temporal activity on a worker) calls `send`, then `edit` no more often than
   `edit_interval` per message, with text already passed through `format` and `split`;
   `send_buttons` posts an approval's Approve/Deny; `answer_button` acknowledges a press;
   `fetch_attachment` downloads a photo or document (through the SSRF-safe fetch path).

Errors: raise `PlatformError` for a refusal the core should log and give up on (a chat the
bot left), `RateLimited` when the platform says to wait (the core waits `retry_after` and
tries again, or skips an intermediate edit). Everything else is retried by Temporal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

ChatKind = Literal["private", "group", "channel"]


class ThreadRef(BaseModel):
    """Where a message was said, and where the reply goes. `chat` is the platform's chat
    (Telegram chat id, Slack channel id); `thread` the thread inside it (Telegram forum topic
    id, Slack `thread_ts`), None for the chat's main line. `key()` names the thread in
    storage and in conversation ids."""

    model_config = ConfigDict(frozen=True)

    chat: str
    thread: str | None = None

    def key(self) -> str:
        return self.chat if self.thread is None else f"{self.chat}:{self.thread}"


class Author(BaseModel):
    """Who said it: the platform's user id, and a display label for speaker prefixes."""

    model_config = ConfigDict(frozen=True)

    id: str
    label: str
    is_bot: bool = False


class AttachmentRef(BaseModel):
    """A file the message carries, not yet fetched: the platform's id for it, its declared
    size (None when the platform does not say), name and media type."""

    model_config = ConfigDict(frozen=True)

    file_id: str
    size: int | None = None
    filename: str = "file"
    media_type: str = "application/octet-stream"


class ButtonPress(BaseModel):
    """A press of a button we posted: the platform's id for the press (to acknowledge it
    with `answer_button`), and the `data` we put on the button."""

    model_config = ConfigDict(frozen=True)

    press_id: str
    data: str
    message_id: str | None = None


class InboundEvent(BaseModel):
    """One message or button press, normalised. `event_id` is unique per bot and stable across
    the platform's retries (Telegram `update_id`, Slack `event_id`)."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    thread: ThreadRef
    author: Author
    chat_kind: ChatKind = "private"
    text: str = ""
    is_dm: bool = False
    mentions_bot: bool = False
    button: ButtonPress | None = None
    attachments: tuple[AttachmentRef, ...] = ()
    message_id: str | None = None


class Challenge(BaseModel):
    """A handshake the webhook must echo (Slack's `url_verification`)."""

    model_config = ConfigDict(frozen=True)

    value: str


class Ignored(BaseModel):
    """A valid request with nothing for the agent; `reason` goes to the debug log."""

    model_config = ConfigDict(frozen=True)

    reason: str


class Button(BaseModel):
    """A button to post: its label and the data a press carries back (≤ 64 bytes)."""

    model_config = ConfigDict(frozen=True)

    label: str
    data: str


class PlatformError(Exception):
    """The platform refused a call for good (the core logs it and gives up on that call)."""


class RateLimited(PlatformError):
    """The platform asked us to wait `retry_after` seconds before the next call."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited: retry after {retry_after} s")
        self.retry_after = retry_after


class Platform(Protocol):
    """One chat platform, bound to one messenger declaration (its token, secret, API URL).
    Built by the platform's `Messenger` subclass; cheap to build, closed with `close()`."""

    limit: int
    """The most characters one message may hold (after `format`): Telegram 4,096."""
    edit_interval: float
    """Seconds between two edits of one message the platform allows (Telegram: ~1 s a chat)."""

    def verify(self, headers: Mapping[str, str], body: bytes) -> bool:
        """Whether the request comes from the platform (secret header, signature and its
        timestamp window...). Constant-time comparisons. True when `verify=False`.
        `headers` keys are lowercase."""
        ...

    async def parse(self, body: bytes) -> InboundEvent | Challenge | Ignored:
        """The request as the core needs it (async: a platform may need to learn its own
        bot's identity once, to tell mentions); raise `ValueError` for a body that is not the
        platform's (the route answers 400)."""
        ...

    def format(self, markdown: str) -> str:
        """Markdown (as models write it) in the platform's dialect, escaped so that any text,
        even a half-written reply, is accepted by the platform."""
        ...

    def split(self, markdown: str) -> list[str]:
        """`markdown` cut into pieces whose `format` fits `limit`, at paragraph, line or word
        boundaries where possible. Returns markdown (format each piece to send it)."""
        ...

    async def send(self, thread: ThreadRef, text: str) -> str:
        """Post formatted `text` into `thread`; the new message's id."""
        ...

    async def edit(self, thread: ThreadRef, message_id: str, text: str) -> None:
        """Replace the text of our message `message_id` (formatted). An unchanged text is
        not an error."""
        ...

    async def send_buttons(self, thread: ThreadRef, text: str, buttons: list[Button]) -> str:
        """Post formatted `text` with a row of buttons; the message's id."""
        ...

    async def answer_button(self, press_id: str, text: str) -> None:
        """Acknowledge a button press with a short note shown to the presser."""
        ...

    async def fetch_attachment(self, ref: AttachmentRef, max_bytes: int) -> bytes:
        """The attachment's bytes; raise `AttachmentTooLarge` past `max_bytes`."""
        ...

    async def close(self) -> None:
        """Release the client's connections."""
        ...


class AttachmentTooLarge(PlatformError):
    """An attachment over the messenger's `max_attachment_bytes`."""

    def __init__(self, filename: str, size: int | None, limit: int) -> None:
        shown = "" if size is None else f" ({size:,} bytes)"
        super().__init__(f"{filename}{shown} is over the {limit:,}-byte limit")
        self.filename = filename
        self.limit = limit
