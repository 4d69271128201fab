"""Workflow code changes must not break running workflows: replay committed histories.

`tests/histories/*.json` are real histories recorded from earlier versions. A change that makes
the workflows nondeterministic against them fails here, not in production. To add one, run the
suite with THINK_RECORD_HISTORIES=1 and commit the new file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.conftest import helper_path
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows import WORKFLOWS
from think.workflows._names import turn_workflow_id
from workers.worker import workflow_runner

HISTORIES = Path(__file__).parent / "histories"


def replayer() -> Replayer:
    return Replayer(
        workflows=WORKFLOWS,
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )


def _load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))


@pytest.mark.parametrize("path", sorted(HISTORIES.glob("*.json")), ids=lambda p: p.stem)
async def test_committed_history_replays(path: Path) -> None:
    result = await replayer().replay_workflow(_load(path), raise_on_replay_failure=True)
    assert result.replay_failure is None


async def test_tool_turn_history_replays(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
    turn = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "1+2?", "mode": "wait"})
    ).json()
    assert turn["status"] == "completed"
    handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
    history = await handle.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    if os.environ.get("THINK_RECORD_HISTORIES"):
        (HISTORIES / "tool-turn.json").write_text(history.to_json())
