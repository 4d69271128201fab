"""Agents that answer on Telegram, hosted by the messenger tests' own worker (never by the
session's shared one). Their Bot API is the fake server whose URL `TEST_TG_API` names."""

from __future__ import annotations

import os
from pathlib import Path

from tests.agents import delete_file
from tests.schedule_agents import FAR
from think import (
    Messenger,
    MessengerContext,
    ScheduledRun,
    ScheduledTask,
    TelegramMessenger,
    Think,
    Tool,
    get_messenger_context,
    tool,
)

TOKEN_ENV = "TEST_TG_TOKEN"
SECRET_ENV = "TEST_TG_SECRET"
API_ENV = "TEST_TG_API"
NOTICE_TARGET = "notice-target"
"""The file under THINK_HOME naming the conversation the scheduled notice goes to."""


def telegram(**options: object) -> TelegramMessenger:
    return TelegramMessenger.model_validate(
        {
            "token_env": TOKEN_ENV,
            "secret_token_env": SECRET_ENV,
            "api_url": os.environ.get(API_ENV, "http://127.0.0.1:9"),
            **options,
        }
    )


@tool
async def where_am_i() -> str:
    """Say which chat this turn answers (its messenger context)."""
    context: MessengerContext | None = await get_messenger_context()
    if context is None:
        return "not a messenger turn"
    return f"{context.messenger} chat {context.thread.chat} for {context.author.label}"


class Chatty(Think):
    name = "tg_chatty"
    messenger_concurrency = 0.6

    def get_model(self) -> str:
        return "scripted-model"

    def get_system_prompt(self) -> str:
        return "You answer on Telegram."

    def get_tools(self) -> list[Tool]:
        return [delete_file, where_am_i]

    def get_messengers(self) -> list[Messenger]:
        return [
            telegram(
                respond_to=("dm", "mention", "subscribed-thread"),
                max_attachment_bytes=6_000_000,
            )
        ]

    async def digest(self, run: ScheduledRun) -> None:
        target = (Path(os.environ["THINK_HOME"]) / NOTICE_TARGET).read_text().strip()
        await self.deliver_notice(target, "Daily digest: all builds are green.")

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        return {"digest": ScheduledTask(schedule=FAR + " in UTC", handler=self.digest)}


class Whole(Chatty):
    """Sends each reply once, complete."""

    name = "tg_whole"

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        return {}

    def get_messengers(self) -> list[Messenger]:
        return [telegram(stream="whole")]


class Bursty(Whole):
    """A burst window wide enough for a loaded test machine (the default is 0.6 s)."""

    name = "tg_bursty"
    messenger_concurrency = 2.0

    def get_messengers(self) -> list[Messenger]:
        return [telegram()]


class Prompt(Whole):
    """No burst window: each message is its own turn at once (bench/messengers.py)."""

    name = "tg_prompt"
    messenger_concurrency = 0

    def get_messengers(self) -> list[Messenger]:
        return [telegram()]


class Strict(Whole):
    """Approvals decided in the chat by one Telegram user only (`telegram:4242`)."""

    name = "tg_strict"
    approvers = frozenset({"telegram:4242"})

    def get_messengers(self) -> list[Messenger]:
        return [telegram()]


class Shared(Whole):
    """Every chat feeds one conversation (`conversation="self"`)."""

    name = "tg_shared"

    def get_messengers(self) -> list[Messenger]:
        return [telegram(conversation="self")]


class Unverified(Think):
    """Declares a bot with no verification posture: a worker must refuse to start."""

    name = "tg_unverified"

    def get_messengers(self) -> list[Messenger]:
        return [TelegramMessenger(token_env=TOKEN_ENV)]
