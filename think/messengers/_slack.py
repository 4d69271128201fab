"""Slack, on `slack_sdk` (`SignatureVerifier` for webhooks, `AsyncWebClient` for the Web API):
the declaration (`SlackMessenger`) and its `Platform`.

One webhook takes both of Slack's request kinds: the Events API (JSON) and interactivity
(form-encoded `payload=`), so the app's Event Subscriptions and Interactivity request URLs
are the same `POST /v1/messengers/{agent}/{messenger}/webhook` (docs/messengers.md, "Slack").

Threads: a Slack thread is named by its first message's `ts`; a reply goes into the thread
of the message it answers (`thread_ts`), and a message that starts no thread yet starts one.
So a DM's top-level message and a channel mention are each answered in their own thread,
each its own conversation (`conversation="self"` folds them into one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from urllib.parse import urlsplit

import orjson

from think.messengers._declarations import Messenger
from think.messengers._download import DownloadTooLarge, download
from think.messengers._platform import (
    AttachmentRef,
    AttachmentTooLarge,
    Author,
    Button,
    ButtonPress,
    Challenge,
    ChatKind,
    Ignored,
    InboundEvent,
    Platform,
    PlatformError,
    RateLimited,
    ThreadRef,
)
from think.messengers._slack_api import (
    SLACK_API_URL,
    SLACK_EDIT_INTERVAL,
    SlackApi,
    SlackCallFailed,
    SlackRateLimited,
    button_blocks,
    section_blocks,
)
from think.messengers._slack_events import (
    SlackAction,
    SlackChallenge,
    SlackIgnored,
    SlackMessage,
    SlackRequestError,
    read_slack,
    verify_slack,
)
from think.messengers._slack_format import SLACK_MESSAGE_LIMIT, split_markdown, to_mrkdwn

FORM = "application/x-www-form-urlencoded"
LOOKUP_TIMEOUT = 1.0
"""Seconds the webhook's path waits for Slack to say a name (`users.info`, `auth.test`)."""
VERDICTS = {"Approved": "Approved", "Denied": "Denied"}
"""The notes the core answers a deciding press with (`think.messenger_turns`: "Approved." /
"Denied."), and what the settled message says; any other note (already decided, not an
approver) goes to the presser alone."""


class SlackMessenger(Messenger):
    """A Slack app's bot (Events API and interactivity, one request URL). Verified by the
    app's signing secret: `X-Slack-Signature` over the body and `X-Slack-Request-Timestamp`,
    which must be within five minutes (an older request is a replay, refused).

    Replies go into the asking message's thread, stream by `chat.update` at most once a
    second (Slack's rate), are split into messages of 3,000 characters of mrkdwn, and show an
    approval as Approve / Deny buttons (Block Kit)."""

    platform: str = "slack"
    name: str = "slack"
    token_env: str = "SLACK_BOT_TOKEN"
    signing_secret_env: str | None = None
    """The variable holding the app's Signing Secret (Basic Information, App Credentials)."""
    api_url: str = SLACK_API_URL

    def secret_env(self) -> str | None:
        return self.signing_secret_env if self.verify else None

    def _secret_field(self) -> str:
        return "signing_secret_env"

    def client(self) -> Platform:
        return SlackPlatform(self)


class SlackPlatform:
    """`Platform` for one `SlackMessenger`."""

    limit = SLACK_MESSAGE_LIMIT
    edit_interval = SLACK_EDIT_INTERVAL

    def __init__(self, messenger: SlackMessenger) -> None:
        self.messenger = messenger
        self.api = SlackApi(messenger.token(), messenger.api_url)
        self._bot_user: str | None = None

    def verify(self, headers: Mapping[str, str], body: bytes) -> bool:
        secret = self.messenger.secret()
        if secret is None:
            return True
        return bool(secret) and verify_slack(body, headers, secret)

    async def parse(self, body: bytes) -> InboundEvent | Challenge | Ignored:
        kind = FORM if body.startswith(b"payload=") else "application/json"
        if self._bot_user is None and kind != FORM and b'"authorizations"' not in body:
            # Slack names the bot in each event's `authorizations`; without them, ask once,
            # so a mention's message twin and our own words are still told apart.
            with suppress(SlackCallFailed, TimeoutError):
                self._bot_user = await asyncio.wait_for(self.api.bot_user_id(), LOOKUP_TIMEOUT)
        try:
            read = read_slack(body, kind, self._bot_user)
        except SlackRequestError as exc:
            raise ValueError(str(exc)) from None
        match read:
            case SlackChallenge():
                return Challenge(value=read.challenge)
            case SlackIgnored():
                return Ignored(reason=read.reason)
            case SlackMessage():
                return await self._message(read)
            case SlackAction():
                return await self._press(read)

    async def _message(self, message: SlackMessage) -> InboundEvent:
        return InboundEvent(
            event_id=message.key,
            thread=ThreadRef(chat=message.channel, thread=message.thread_ts),
            author=Author(id=message.user, label=await self._label(message.user)),
            chat_kind=_kind(message.channel_type),
            text=message.text,
            is_dm=message.direct,
            mentions_bot=message.mentioned,
            attachments=tuple(
                AttachmentRef(
                    file_id=url,
                    size=file.size,
                    filename=file.name or file.id,
                    media_type=file.mimetype or "application/octet-stream",
                )
                for file in message.files
                if (url := file.url_private_download or file.url_private)
            ),
            message_id=message.ts,
        )

    async def _press(self, action: SlackAction) -> InboundEvent:
        press = orjson.dumps(
            {
                "channel": action.channel,
                "thread": action.thread_ts,
                "ts": action.message_ts,
                "user": action.user,
                "shown": action.shown,
            }
        ).decode()
        return InboundEvent(
            event_id=action.key,
            thread=ThreadRef(chat=action.channel, thread=action.thread_ts),
            author=Author(id=action.user, label=action.user_name or action.user),
            chat_kind="private" if action.channel.startswith("D") else "group",
            is_dm=action.channel.startswith("D"),
            button=ButtonPress(press_id=press, data=action.value, message_id=action.message_ts),
        )

    async def _label(self, user: str) -> str:
        """The speaker's name for group labels; the id when Slack will not say (no
        `users:read` scope) or not soon (this is the webhook's path, which Slack wants
        answered within 3 s): a label is a courtesy, never a reason to drop a message."""
        try:
            return await asyncio.wait_for(self.api.user_label(user), LOOKUP_TIMEOUT)
        except (SlackCallFailed, TimeoutError):
            return user

    def format(self, markdown: str) -> str:
        return to_mrkdwn(markdown)

    def split(self, markdown: str) -> list[str]:
        return split_markdown(markdown, SLACK_MESSAGE_LIMIT)

    async def send(self, thread: ThreadRef, text: str) -> str:
        async with _refusals("chat.postMessage", thread):
            return await self.api.post(thread.chat, text, thread_ts=thread.thread)

    async def edit(self, thread: ThreadRef, message_id: str, text: str) -> None:
        # The blocks replace any the message had: editing an approval's message replaces
        # its buttons with the words, as Telegram's edit drops an inline keyboard.
        async with _refusals("chat.update", thread):
            await self.api.update(
                thread.chat, message_id, text, blocks=section_blocks(text) if text else None
            )

    async def send_buttons(self, thread: ThreadRef, text: str, buttons: list[Button]) -> str:
        blocks = button_blocks(text, [(b.label, b.data) for b in buttons])
        async with _refusals("chat.postMessage", thread):
            return await self.api.post(thread.chat, text, thread_ts=thread.thread, blocks=blocks)

    async def answer_button(self, press_id: str, text: str) -> None:
        """Tell the presser alone (an ephemeral message in the thread), as Telegram's toast;
        and once a press has decided (`text` is the core's verdict), settle the pressed
        message for everyone: its words kept, the buttons replaced by who decided what, so
        nobody presses a decided approval again."""
        press = orjson.loads(press_id)
        thread = ThreadRef(chat=press["channel"], thread=press.get("thread"))
        user = str(press["user"])
        verdict = next((v for v in VERDICTS if text.startswith(v)), None)
        if verdict is not None and press.get("ts"):
            note = f"{VERDICTS[verdict]} by <@{user}>"
            shown = str(press.get("shown") or "")
            blocks = [*section_blocks(shown), _context(note)] if shown else [_context(note)]
            async with _refusals("chat.update", thread):
                await self.api.update(
                    thread.chat, str(press["ts"]), f"{shown}\n{note}".strip(), blocks=blocks
                )
        async with _refusals("chat.postEphemeral", thread):
            await self.api.ephemeral(thread.chat, user, text, thread_ts=thread.thread)

    async def fetch_attachment(self, ref: AttachmentRef, max_bytes: int) -> bytes:
        if ref.size is not None and ref.size > max_bytes:
            raise AttachmentTooLarge(ref.filename, ref.size, max_bytes)
        api_host = urlsplit(self.messenger.api_url).hostname or ""
        host = urlsplit(ref.file_id).hostname or ""
        if not (host == api_host or host == "slack.com" or host.endswith(".slack.com")):
            # The bot token goes to Slack alone, whatever a payload names.
            raise PlatformError(f"{ref.filename!r} is not on Slack ({host!r}): not fetched")
        try:
            return await download(
                ref.file_id,
                max_bytes,
                trusted=self.messenger.api_url.rstrip("/") != SLACK_API_URL.rstrip("/"),
                headers={"Authorization": f"Bearer {self.messenger.token()}"},
            )
        except DownloadTooLarge:
            raise AttachmentTooLarge(ref.filename, None, max_bytes) from None

    async def close(self) -> None:
        """Nothing held: `slack_sdk` opens an HTTP session per call."""


def _context(note: str) -> dict[str, object]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}


def _kind(channel_type: str) -> ChatKind:
    return "private" if channel_type == "im" else "group"


@asynccontextmanager
async def _refusals(method: str, thread: ThreadRef) -> AsyncIterator[None]:
    """Slack's answers as the seam's errors: 429 `RateLimited`, `ok: false` `PlatformError`."""
    try:
        yield
    except SlackRateLimited as exc:
        raise RateLimited(exc.retry_after) from exc
    except SlackCallFailed as exc:
        raise PlatformError(f"{method} in {thread.chat}: {exc.error}") from exc


__all__ = ["SlackMessenger", "SlackPlatform"]
