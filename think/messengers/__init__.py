"""Messengers: an agent answering on chat platforms (Telegram here; Slack on the same seam).

The declarations (`Think.get_messengers()` returns them), the platform seam each platform
implements (`Platform`, `InboundEvent`, ...: `think.messengers._platform` documents the
contract), markdown and splitting for the platform's dialect, and `get_messenger_context()`
for hooks and tools. Receiving webhooks and delivering replies (admission, the delivery state
machine) live above the turn API, in `think.messenger_turns`; docs/messengers.md has the
whole walk.
"""

from think.messengers._context import MessengerContext, get_messenger_context
from think.messengers._declarations import (
    ConversationScope,
    Messenger,
    MessengerConfigError,
    RespondTo,
    StreamMode,
    check_messengers,
)
from think.messengers._download import DownloadTooLarge, download
from think.messengers._markdown import escape, split_markdown, to_markdown_v2
from think.messengers._notices import deliver_notice, start_delivery
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
from think.messengers._slack import SlackMessenger, SlackPlatform
from think.messengers._telegram import SECRET_HEADER, TelegramMessenger

__all__ = [
    "SECRET_HEADER",
    "AttachmentRef",
    "AttachmentTooLarge",
    "Author",
    "Button",
    "ButtonPress",
    "Challenge",
    "ChatKind",
    "ConversationScope",
    "DownloadTooLarge",
    "Ignored",
    "InboundEvent",
    "Messenger",
    "MessengerConfigError",
    "MessengerContext",
    "Platform",
    "PlatformError",
    "RateLimited",
    "RespondTo",
    "SlackMessenger",
    "SlackPlatform",
    "StreamMode",
    "TelegramMessenger",
    "ThreadRef",
    "check_messengers",
    "deliver_notice",
    "download",
    "escape",
    "get_messenger_context",
    "split_markdown",
    "start_delivery",
    "to_markdown_v2",
]
