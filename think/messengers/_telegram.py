"""Telegram: the declaration (`TelegramMessenger`). Its `Platform`, on python-telegram-bot,
is `think.messengers._telegram_bot`, imported when a client is first built.

Why python-telegram-bot rather than aiogram: it needs only httpx (already ours), and its
`Bot(base_url=...)` points every call at a local fake; aiogram brings aiohttp and pins
pydantic. We use its `Bot` alone, not its `Application` (we have our own webhook route,
dedupe and durability).
"""

from __future__ import annotations

from think.messengers._declarations import Messenger
from think.messengers._platform import Platform

SECRET_HEADER = "x-telegram-bot-api-secret-token"
LIMIT = 4096
DEFAULT_API = "https://api.telegram.org"


class TelegramMessenger(Messenger):
    """A Telegram bot (Bot API webhooks). Verified by the secret token given to `setWebhook`
    (`secret_token=`), which Telegram sends back in `X-Telegram-Bot-Api-Secret-Token`.

    Threads: a private chat is one thread; in a group or supergroup, each forum topic
    (`message_thread_id`) is a thread and the rest of the chat another. Replies stream by
    editing one message at most once a second (Telegram's per-chat limit), split at 4,096
    characters, in MarkdownV2. Approvals are inline keyboard buttons."""

    platform: str = "telegram"
    name: str = "telegram"
    token_env: str = "TELEGRAM_BOT_TOKEN"
    secret_token_env: str | None = None
    """The variable holding the `secret_token` given to `setWebhook`."""
    api_url: str = DEFAULT_API

    def secret_env(self) -> str | None:
        return self.secret_token_env if self.verify else None

    def _secret_field(self) -> str:
        return "secret_token_env"

    def client(self) -> Platform:
        # Imported here, not above: python-telegram-bot is for the processes that talk to
        # Telegram, not for every `import think` (it costs ~0.1 s).
        from think.messengers._telegram_bot import TelegramPlatform

        return TelegramPlatform(self)
