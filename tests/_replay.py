"""Replaying recorded workflow histories against today's workflow code (tests/histories/)."""

from __future__ import annotations

from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from think.schedules import ScheduledOccurrence
from think.server import workflow_runner
from think.workflows import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


def replayer() -> Replayer:
    return Replayer(
        workflows=[*WORKFLOWS, ScheduledOccurrence],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
