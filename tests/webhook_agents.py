"""Agents with outbound webhooks and channels (tests/webhooks, tests/channels). Their webhook
URLs name the test's receiver through THINK_TEST_WEBHOOK_BASE, set before the worker starts."""

from __future__ import annotations

import os

from tests.agents import Helper, add, delete_file, get_weather
from think import Channel, Think, Tool, Webhook

BASE = os.environ.get("THINK_TEST_WEBHOOK_BASE", "http://127.0.0.1:9")
SECRET_ENV = "THINK_TEST_WEBHOOK_SECRET"


class Notified(Helper):
    """Every event to a receiver that fails twice before it answers 200; completions also to
    one that refuses them (400)."""

    name = "notified"
    webhooks = [
        Webhook(url=f"{BASE}/flaky", secret_env=SECRET_ENV),
        Webhook(url=f"{BASE}/reject", events=["turn.completed"], secret_env=SECRET_ENV),
    ]

    def get_tools(self) -> list[Tool]:
        return [get_weather, add, delete_file]


class Channeled(Helper):
    """A "slack" channel with its own instructions, one tool and two steps."""

    name = "channeled"

    def get_tools(self) -> list[Tool]:
        return [get_weather, add]

    def configure_channels(self) -> list[Channel]:
        return [
            Channel("slack", instructions="Answer in Slack's style: short.", tools=["add"]),
            Channel("sms", max_steps=1),
        ]


class TwinChannels(Helper):
    name = "twin_channels"

    def configure_channels(self) -> list[Channel]:
        return [Channel("slack"), Channel("slack", instructions="again")]


class UnknownTool(Helper):
    name = "unknown_tool"

    def configure_channels(self) -> list[Channel]:
        return [Channel("slack", tools=["add", "launch_rockets"])]


class Unsigned(Think):
    """A webhook whose secret variable is never set."""

    name = "unsigned"
    webhooks = [Webhook(url="https://hooks.example.com/x", secret_env="THINK_TEST_NEVER_SET")]


class Durable(Helper):
    """Completions to a receiver that is down (503) for its first four attempts."""

    name = "durable"
    webhooks = [Webhook(url=f"{BASE}/down", events=["turn.completed"], secret_env=SECRET_ENV)]
