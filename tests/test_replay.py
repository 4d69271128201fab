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
from think.workflows._names import conversation_workflow_id, turn_workflow_id
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


async def test_fresh_histories_replay(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """Histories made now replay in the sandbox (which rejects nondeterministic calls)."""
    fake_model.script(cid, text("plain"), tool_call("add", {"a": 1, "b": 2}), text("3"))
    histories: dict[str, WorkflowHistory] = {}
    for name, words in (("plain-turn", "hello"), ("tool-turn", "1+2?")):
        turn = (
            await api.post(f"{helper_path(cid)}/turns", json={"input": words, "mode": "wait"})
        ).json()
        assert turn["status"] == "completed"
        handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
        await handle.result()  # the turn is stored before its workflow has quite finished
        histories[name] = await handle.fetch_history()
    conversation = temporal.get_workflow_handle(conversation_workflow_id("default", "helper", cid))
    histories["conversation"] = await conversation.fetch_history()
    for history in histories.values():
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
    if os.environ.get("THINK_RECORD_HISTORIES"):
        for name, history in histories.items():
            (HISTORIES / f"{name}.json").write_text(history.to_json())
