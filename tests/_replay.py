"""Replaying recorded workflow histories against today's workflow code (tests/histories/)."""

from __future__ import annotations

from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from examples.webhook_reply import WebhookReply
from tests.user_workflows import AskThink
from think.schedules import ScheduledOccurrence
from think.server import workflow_runner
from think.workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


def replayer() -> Replayer:
    return Replayer(
        # With the users' own workflows the test stacks host (`THINK_WORKFLOWS`).
        workflows=[*WORKFLOWS, ScheduledOccurrence, WebhookReply, AskThink],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
