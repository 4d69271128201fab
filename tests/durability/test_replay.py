"""Workflow code changes must not break running workflows: replay committed histories.

`tests/histories/*.json` are real histories recorded from earlier versions. A change that makes
the workflows nondeterministic against them fails here, not in production. To add one, run the
suite with THINK_RECORD_HISTORIES=1 (it writes only files that do not exist yet) and commit
the new file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client, WorkflowHistory

from tests._replay import HISTORIES, replayer
from tests._sse import deltas, read_until
from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, reply, text, tool_call
from think.workflows.names import turn_workflow_id


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
    for history in histories.values():
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
    for name, history in histories.items():
        # Only new files: a committed history is what running workflows look like, and a
        # change that fails to replay it needs `workflow.patched`, not a re-recording.
        path = HISTORIES / f"{name}.json"
        if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
            path.write_text(history.to_json())


async def test_paused_turn_histories_replay(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """Turns that paused for a person (approved by Signal) and for a client tool."""
    fake_model.script(
        cid,
        tool_call("delete_file", {"path": "x"}, id="call_del"),
        text("deleted"),
        tool_call("get_location", {}, id="call_loc"),
        text("Lyon"),
    )
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    histories: dict[str, WorkflowHistory] = {}
    turn = (await api.post(f"{base}/turns", json={"input": "rm x", "mode": "wait"})).json()
    handle = temporal.get_workflow_handle(turn_workflow_id("gatekeeper", cid, turn["turn_id"]))
    approval_id = turn["pending_approvals"][0]["approval_id"]
    await handle.signal("approve", {"approval_id": approval_id, "approved": True})
    await handle.result()
    histories["approval-turn"] = await handle.fetch_history()

    location = {"name": "get_location", "input_schema": {"type": "object"}}
    body = {"input": "where?", "mode": "wait", "client_tools": [location]}
    turn = (await api.post(f"{base}/turns", json=body)).json()
    assert turn["status"] == "awaiting_client_tool", turn
    answer = await api.post(f"{turn['status_url']}/tool-results/call_loc", json={"output": "Lyon"})
    assert answer.status_code == 200, answer.text
    handle = temporal.get_workflow_handle(turn_workflow_id("gatekeeper", cid, turn["turn_id"]))
    await handle.result()
    histories["client-tool-turn"] = await handle.fetch_history()
    for history in histories.values():
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
    for name, history in histories.items():
        path = HISTORIES / f"{name}.json"
        if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
            path.write_text(history.to_json())


async def test_cancelled_turn_history_replays(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """A streaming turn whose workflow was cancelled from Temporal ("Request cancellation" in
    the UI): the workflow tells that cancel from a lost task by its main task's `cancelling()`,
    and a replay must take the same branch."""
    fake_model.script(cid, reply(text(*[f"w{i} " for i in range(60)]), delay=0.25))
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "long"})).json()
    await read_until(api, turn["stream_url"], deltas(3))
    handle = temporal.get_workflow_handle(turn_workflow_id("helper", cid, turn["turn_id"]))
    await handle.cancel()
    assert (await handle.result())["status"] == "aborted"
    history = await handle.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    path = HISTORIES / "cancelled-turn.json"
    if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
        path.write_text(history.to_json())
