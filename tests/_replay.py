"""Replaying recorded workflow histories against today's workflow code (tests/histories/)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from examples.webhook_reply import WebhookReply
from tests.user_workflows import AskThink
from think.retention import EraseTenant, RetentionSweep
from think.schedules import ScheduledOccurrence
from think.server import workflow_runner
from think.workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


def replayer() -> Replayer:
    return Replayer(
        # With the users' own workflows the test stacks host (`THINK_WORKFLOWS`).
        workflows=[
            *WORKFLOWS,
            ScheduledOccurrence,
            RetentionSweep,
            EraseTenant,
            WebhookReply,
            AskThink,
        ],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )


async def replayed(handle: Any, name: str) -> None:
    """Replay a closed workflow's history (a `WorkflowHandle`'s) against today's code, and
    record it as `tests/histories/<name>.json` with THINK_RECORD_HISTORIES=1 when that file
    does not exist yet (tests/durability/test_replay.py replays every committed one)."""
    history = await handle.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    path = HISTORIES / f"{name}.json"
    if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
        path.write_text(history.to_json())
