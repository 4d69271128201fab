"""Agents that answer in Slack (tests/messengers/test_slack.py): their Web API is the fake
Slack the test module starts (`SLACK_TEST_API_URL`), their secrets test values."""

from __future__ import annotations

import os

from tests.agents import Helper, delete_file
from think import Messenger, SlackMessenger, Tool


def _slack(**fields: object) -> SlackMessenger:
    return SlackMessenger(
        token_env="SLACK_TEST_BOT_TOKEN",
        signing_secret_env="SLACK_TEST_SIGNING_SECRET",
        api_url=os.environ.get("SLACK_TEST_API_URL", "https://slack.com/api/"),
        **fields,  # type: ignore[arg-type]  # SlackMessenger validates them
    )


class SlackHelper(Helper):
    """DMs, mentions and subscribed threads; a tool that needs approval (pressed in Slack)."""

    name = "slack_helper"
    messenger_concurrency = 0.0

    def get_tools(self) -> list[Tool]:
        return [delete_file]

    def get_messengers(self) -> list[Messenger]:
        return [_slack(respond_to=("dm", "mention", "subscribed-thread"))]


class SlackGuarded(SlackHelper):
    """SlackHelper whose approvals only the Slack user UBOSS may decide."""

    name = "slack_guarded"
    approvers = frozenset({"slack:UBOSS"})
