"""Telegram's `Platform`, on python-telegram-bot (`telegram.Bot` for the Bot API calls,
`telegram.Update` for parsing webhooks). Imported when a messenger's client is first built
(`TelegramMessenger.client()`), not with `think`: the library costs a process ~0.1 s to import.

Why python-telegram-bot rather than aiogram: it needs only httpx (already ours), and its
`Bot(base_url=...)` points every call at a local fake; aiogram brings aiohttp and pins
pydantic. We use its `Bot` alone, not its `Application` (we have our own webhook route,
dedupe and durability).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

import httpx
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, Update, User
from telegram.constants import MessageEntityType, ParseMode
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError

from think.messengers._download import DownloadTooLarge, download
from think.messengers._markdown import split_markdown, to_markdown_v2
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
    PlatformError,
    RateLimited,
    ThreadRef,
)
from think.messengers._telegram import DEFAULT_API, LIMIT, SECRET_HEADER, TelegramMessenger
from think.tools import AddressRefused


class TelegramPlatform:
    """`Platform` for one `TelegramMessenger`."""

    limit = LIMIT
    edit_interval = 1.0

    def __init__(self, messenger: TelegramMessenger) -> None:
        self.messenger = messenger
        base = messenger.api_url.rstrip("/")
        self._base = base
        self.bot = Bot(messenger.token(), base_url=f"{base}/bot", base_file_url=f"{base}/file/bot")
        self._me: User | None = None

    def verify(self, headers: Mapping[str, str], body: bytes) -> bool:
        expected = self.messenger.secret()
        if expected is None:
            return True
        given = headers.get(SECRET_HEADER, "")
        return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())

    async def me(self) -> User:
        """The bot itself (`getMe`, once): its username tells mentions."""
        if self._me is None:
            try:
                self._me = await self.bot.get_me()
            except TelegramError as exc:
                raise PlatformError(f"getMe failed: {exc.message}") from exc
        return self._me

    async def parse(self, body: bytes) -> InboundEvent | Challenge | Ignored:
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ValueError(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            raise ValueError("the body is not a Telegram Update (no integer update_id)")
        update = Update.de_json(data, self.bot)
        event_id = str(update.update_id)
        if update.callback_query is not None:
            query = update.callback_query
            message = query.message
            if not isinstance(message, Message):
                return Ignored(reason="a button press on a message too old to read")
            return InboundEvent(
                event_id=event_id,
                thread=_thread(message),
                author=_author(query.from_user),
                chat_kind=_kind(message.chat.type),
                is_dm=message.chat.type == "private",
                button=ButtonPress(
                    press_id=query.id, data=query.data or "", message_id=str(message.message_id)
                ),
            )
        message = update.message
        if message is None:
            return Ignored(reason="not a new message (an edit, a channel post, ...)")
        if message.from_user is None or message.from_user.is_bot:
            return Ignored(reason="a message from a bot or with no sender")
        me = await self.me()
        text = message.text or message.caption or ""
        return InboundEvent(
            event_id=event_id,
            thread=_thread(message),
            author=_author(message.from_user),
            chat_kind=_kind(message.chat.type),
            text=text,
            is_dm=message.chat.type == "private",
            mentions_bot=_mentions(message, me),
            attachments=_attachments(message),
            message_id=str(message.message_id),
        )

    def format(self, markdown: str) -> str:
        return to_markdown_v2(markdown)

    def split(self, markdown: str) -> list[str]:
        return split_markdown(markdown, LIMIT, to_markdown_v2)

    async def send(self, thread: ThreadRef, text: str) -> str:
        return await self._send(thread, text, None)

    async def send_buttons(self, thread: ThreadRef, text: str, buttons: list[Button]) -> str:
        keyboard = InlineKeyboardMarkup(
            [[InlineKeyboardButton(b.label, callback_data=b.data) for b in buttons]]
        )
        return await self._send(thread, text, keyboard)

    async def _send(self, thread: ThreadRef, text: str, markup: InlineKeyboardMarkup | None) -> str:
        try:
            sent = await self.bot.send_message(
                chat_id=thread.chat,
                text=text,
                parse_mode=ParseMode.MARKDOWN_V2,
                message_thread_id=int(thread.thread) if thread.thread else None,
                reply_markup=markup,
            )
        except RetryAfter as exc:
            raise RateLimited(_seconds(exc.retry_after)) from exc
        except (BadRequest, Forbidden) as exc:
            raise PlatformError(f"sendMessage to chat {thread.chat}: {exc.message}") from exc
        return str(sent.message_id)

    async def edit(self, thread: ThreadRef, message_id: str, text: str) -> None:
        try:
            await self.bot.edit_message_text(
                text=text,
                chat_id=thread.chat,
                message_id=int(message_id),
                parse_mode=ParseMode.MARKDOWN_V2,
            )
        except RetryAfter as exc:
            raise RateLimited(_seconds(exc.retry_after)) from exc
        except BadRequest as exc:
            if "not modified" in exc.message:
                return
            raise PlatformError(f"editMessageText in chat {thread.chat}: {exc.message}") from exc
        except Forbidden as exc:
            raise PlatformError(f"editMessageText in chat {thread.chat}: {exc.message}") from exc

    async def answer_button(self, press_id: str, text: str) -> None:
        try:
            await self.bot.answer_callback_query(press_id, text=text)
        except BadRequest as exc:  # too old to answer: the press itself was handled
            raise PlatformError(f"answerCallbackQuery: {exc.message}") from exc

    async def fetch_attachment(self, ref: AttachmentRef, max_bytes: int) -> bytes:
        if ref.size is not None and ref.size > max_bytes:
            raise AttachmentTooLarge(ref.filename, ref.size, max_bytes)
        try:
            file = await self.bot.get_file(ref.file_id)
        except TelegramError as exc:
            raise PlatformError(f"getFile for {ref.filename!r}: {exc.message}") from exc
        if file.file_size is not None and file.file_size > max_bytes:
            raise AttachmentTooLarge(ref.filename, file.file_size, max_bytes)
        if not file.file_path:
            raise PlatformError(f"getFile gave no path for {ref.filename!r}")
        try:
            return await download(
                file.file_path,
                max_bytes,
                trusted=self.messenger.api_url.rstrip("/") != DEFAULT_API,
            )
        except DownloadTooLarge:
            raise AttachmentTooLarge(ref.filename, None, max_bytes) from None
        except (httpx.HTTPError, AddressRefused) as exc:
            raise PlatformError(f"downloading {ref.filename!r}: {exc}") from exc

    async def close(self) -> None:
        await self.bot.shutdown()


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def _thread(message: Message) -> ThreadRef:
    topic = message.message_thread_id if message.is_topic_message else None
    return ThreadRef(chat=str(message.chat.id), thread=None if topic is None else str(topic))


def _kind(chat_type: str) -> ChatKind:
    if chat_type == "private":
        return "private"
    return "channel" if chat_type == "channel" else "group"


def _author(user: User) -> Author:
    label = user.full_name or (f"@{user.username}" if user.username else str(user.id))
    return Author(id=str(user.id), label=label, is_bot=user.is_bot)


def _mentions(message: Message, me: User) -> bool:
    """Whether the message addresses the bot: an @mention of its username, a text mention
    of its user, a command addressed to it, or a reply to one of its messages."""
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == me.id:
        return True
    name = f"@{me.username}".lower() if me.username else None
    for entity, text in message.parse_entities().items():
        if entity.type == MessageEntityType.MENTION and name and text.lower() == name:
            return True
        if (
            entity.type == MessageEntityType.TEXT_MENTION
            and entity.user
            and entity.user.id == me.id
        ):
            return True
        if entity.type == MessageEntityType.BOT_COMMAND and name and text.lower().endswith(name):
            return True
    for entity, text in message.parse_caption_entities().items():
        if entity.type == MessageEntityType.MENTION and name and text.lower() == name:
            return True
    return False


def _attachments(message: Message) -> tuple[AttachmentRef, ...]:
    refs: list[AttachmentRef] = []
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.file_size or 0, p.width * p.height))
        refs.append(
            AttachmentRef(
                file_id=photo.file_id,
                size=photo.file_size,
                filename=f"photo-{message.message_id}.jpg",
                media_type="image/jpeg",
            )
        )
    if message.document is not None:
        doc = message.document
        refs.append(
            AttachmentRef(
                file_id=doc.file_id,
                size=doc.file_size,
                filename=doc.file_name or f"document-{message.message_id}",
                media_type=doc.mime_type or "application/octet-stream",
            )
        )
    return tuple(refs)


__all__ = ["TelegramPlatform"]
