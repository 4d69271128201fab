"""Human-in-the-loop: a turn pauses for a person's approval, by HTTP, Temporal Update or Signal.

A paused turn is a workflow waiting on a condition: no activity runs and no worker slot is held,
so it survives worker restarts (proved here with SIGKILL) and may wait for days.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from tests._sse import chunks, read_stream
from tests._stack import Stack, own_stack
from tests._turn_helpers import tool_part, until_status
from tests.agents import Gatekeeper
from think import ThinkService
from think._settings import Settings
from think.agent import QueuedBehind
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows import connect
from think.workflows.inputs import ApprovalOutcome, ToolDecision, TurnStatusView
from think.workflows.names import UNKNOWN_APPROVAL, turn_workflow_id

AGENT = "gatekeeper"


def path(cid: str) -> str:
    return f"/v1/agents/{AGENT}/conversations/{cid}"


async def paused(api: httpx.AsyncClient, cid: str, prompt: str = "go") -> dict[str, Any]:
    response = await api.post(f"{path(cid)}/turns", json={"input": prompt, "mode": "wait"})
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "awaiting_approval", turn
    return turn


async def test_approve_over_http_runs_the_tool(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    fake_model.script(
        cid,
        text("Deleting.") + tool_call("delete_file", {"path": "/tmp/x"}, id="call_del"),
        text("Done, it is gone."),
    )
    turn = await paused(api, cid, "delete /tmp/x")
    [pending] = turn["pending_approvals"]
    assert pending["tool_call_id"] == "call_del"
    assert pending["tool_name"] == "delete_file"
    assert pending["input"] == {"path": "/tmp/x"}
    assert tool_part(turn, "call_del")["state"] == "approval-requested"
    assert fake_model.calls(cid) == 1  # nothing ran while paused

    # The operator's view: search attribute, current details and the `status` query.
    handle = temporal.get_workflow_handle(turn_workflow_id(AGENT, cid, turn["turn_id"]))
    view = await handle.query("status", result_type=TurnStatusView)
    assert view.status == "awaiting_approval"
    assert [p.approval_id for p in view.pending_approvals] == [pending["approval_id"]]
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert metadata.current_details == 'awaiting approval: delete_file {"path": "/tmp/x"}'
    found = [
        w
        async for w in temporal.list_workflows(
            f"ThinkConversationId='{cid}' AND ThinkTurnStatus='awaiting_approval'"
        )
    ]
    for _ in range(50):  # visibility is eventually consistent
        if found:
            break
        await asyncio.sleep(0.1)
        found = [
            w
            async for w in temporal.list_workflows(
                f"ThinkConversationId='{cid}' AND ThinkTurnStatus='awaiting_approval'"
            )
        ]
    assert [w.id for w in found] == [handle.id]

    url = f"{turn['status_url']}/approvals/{pending['approval_id']}"
    # Only true and false decide: "yes", 1 or "true" approved a call before they were refused.
    for loose in ("yes", 1, "true", None):
        refused = await api.post(url, json={"approved": loose})
        assert refused.status_code == 422, refused.text
        assert [e["field"] for e in refused.json()["errors"]] == ["approved"]
    decided = await api.post(url, json={"approved": True})
    assert decided.status_code == 200, decided.text
    assert decided.json()["pending_approvals"] == []

    again = await api.post(url, json={"approved": False})
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    unknown = await api.post(
        f"{turn['status_url']}/approvals/approval_nope", json={"approved": True}
    )
    assert unknown.status_code == 404

    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    part = tool_part(final, "call_del")
    assert part["state"] == "output-available"
    assert part["output"] == "deleted /tmp/x"
    assert part["approval"] == {"id": pending["approval_id"], "approved": True}
    # The model saw the tool's result in its second call.
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert {"role": "tool", "tool_call_id": "call_del", "content": "deleted /tmp/x"} in second

    _, events = await read_stream(api, turn["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    order = ["tool-input-available", "tool-approval-request", "finish-step"]
    assert [k for k in kinds if k in order][:3] == order
    assert kinds.index("tool-approval-response") < kinds.index("tool-output-available")
    assert kinds[-1] == "finish"


async def test_deny_tells_the_model_why(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("delete_file", {"path": "/etc"}, id="call_del"),
        text("Understood, I left it."),
    )
    turn = await paused(api, cid)
    approval_id = turn["pending_approvals"][0]["approval_id"]
    response = await api.post(
        f"{turn['status_url']}/approvals/{approval_id}",
        json={"approved": False, "reason": "system files stay"},
    )
    assert response.status_code == 200
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"
    part = tool_part(final, "call_del")
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": approval_id, "approved": False, "reason": "system files stay"}
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert {
        "role": "tool",
        "tool_call_id": "call_del",
        "content": "The tool call was denied: system files stay",
    } in second


async def test_approve_with_a_temporal_signal_and_update(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """What an operator does from the Temporal UI or `temporal workflow signal`."""
    fake_model.script(
        cid,
        tool_call("delete_file", {"path": "a"}, id="call_a"),
        tool_call("delete_file", {"path": "b"}, id="call_b"),
        text("Both done."),
    )
    turn = await paused(api, cid)
    handle = temporal.get_workflow_handle(turn_workflow_id(AGENT, cid, turn["turn_id"]))
    first = turn["pending_approvals"][0]["approval_id"]
    # A signal with a plain JSON payload, as `temporal workflow signal --input` sends it.
    await handle.signal("approve", {"approval_id": first, "approved": True})
    for _ in range(100):
        current = (await api.get(turn["status_url"])).json()
        pending = [p for p in current["pending_approvals"] if p["tool_call_id"] == "call_b"]
        if pending:
            break
        await asyncio.sleep(0.1)
    second = pending[0]["approval_id"]
    assert second != first

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("approve", ToolDecision(approval_id="nope", approved=True))
    # A retry cannot make an unknown id known: the refusal says so (issue 37).
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.type == UNKNOWN_APPROVAL and cause.non_retryable, cause
    outcome = await handle.execute_update(
        "approve",
        ToolDecision(approval_id=second, approved=True, reason="fine"),
        result_type=ApprovalOutcome,
    )
    # The Update answers with the outcome, as the README promises (it answered None).
    assert outcome == ApprovalOutcome(
        approval_id=second,
        tool_call_id="call_b",
        tool_name="delete_file",
        approved=True,
        outcome="approved",
        reason="fine",
        by="update",
    )
    # A second decision is refused: by the validator, or because the turn, which runs on at
    # once, has already finished.
    with pytest.raises((WorkflowUpdateFailedError, RPCError)):
        await handle.execute_update("approve", ToolDecision(approval_id=second, approved=False))

    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"
    assert tool_part(final, "call_a")["output"] == "deleted a"
    assert tool_part(final, "call_b")["output"] == "deleted b"


async def test_a_bad_approve_signal_is_one_log_line_naming_the_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, stack: Stack, cid: str
) -> None:
    """Issue 19: a misspelt key or an unknown id in `temporal workflow signal` said
    "succeeded" while the worker logged a 25-line traceback (or nothing useful)."""
    fake_model.script(cid, tool_call("delete_file", {"path": "a"}, id="call_a"), text("Done."))
    turn = await paused(api, cid)
    workflow_id = turn_workflow_id(AGENT, cid, turn["turn_id"])
    handle = temporal.get_workflow_handle(workflow_id)
    approval_id = turn["pending_approvals"][0]["approval_id"]
    await handle.signal("approve", {"approvalid": approval_id, "approved": True})
    await handle.signal("approve", {"approval_id": "approval_nope", "approved": True})

    workers = [p for p in stack.processes if p.name == "worker" and p.log.exists()]

    def dropped() -> list[tuple[str, str]]:
        """(line, the line after it) for each of this turn's dropped-signal lines."""
        found = []
        for proc in workers:
            lines = proc.log.read_text(errors="replace").splitlines()
            for i, line in enumerate(lines):
                if "dropped approve signal" in line and workflow_id in line:
                    found.append((line, lines[i + 1] if i + 1 < len(lines) else ""))
        return found

    for _ in range(100):
        if len(dropped()) >= 2:
            break
        await asyncio.sleep(0.1)
    (bad_key, after_bad_key), (unknown, after_unknown) = dropped()
    assert f"for turn {workflow_id}:" in bad_key and "approval_id: Field required" in bad_key
    assert "no approval request 'approval_nope'" in unknown and approval_id in unknown
    # One line each: no traceback after it, and not the SDK's own "Failed deserializing".
    for after in (after_bad_key, after_unknown):
        assert not after.startswith(("Traceback", " ")), after
    logs = "\n".join(p.log.read_text(errors="replace") for p in workers)
    assert "Failed deserializing signal input for approve" not in logs
    # Still waiting, and a good signal still decides it.
    assert (await api.get(turn["status_url"])).json()["status"] == "awaiting_approval"
    await handle.signal("approve", {"approval_id": approval_id, "approved": True})
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"


async def test_the_readme_cli_update_refuses_an_unknown_id_and_decides_a_known_one(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, settings: Settings, cid: str
) -> None:
    """The README's `temporal workflow update execute` command, as printed (ids filled in):
    an error a person sees for an unknown approval id, the decision for a known one."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    found = re.search(r"(temporal workflow update execute .*?)\n```", readme, re.S)
    assert found is not None
    command = found.group(1).replace("\\\n", " ")
    fake_model.script(cid, tool_call("delete_file", {"path": "a"}, id="call_a"), text("Done."))
    turn = await paused(api, cid)
    approval_id = turn["pending_approvals"][0]["approval_id"]
    temporal_cli = shlex.quote(str(Path(sys.executable).parent / "temporal"))
    command = command.replace(
        "turn:default:assistant:ops:turn_9a…", turn_workflow_id(AGENT, cid, turn["turn_id"])
    )
    command = command.replace("temporal ", f"{temporal_cli} ", 1)
    command += f" --address {settings.temporal_address} --namespace {settings.temporal_namespace}"

    def run(approval: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command.replace("approval_5c…", approval)],
            capture_output=True,
            text=True,
            timeout=30,
        )

    unknown = await asyncio.to_thread(run, "approval_nope")
    assert unknown.returncode != 0, unknown.stdout
    assert "no approval request 'approval_nope'" in unknown.stderr + unknown.stdout
    known = await asyncio.to_thread(run, approval_id)
    assert known.returncode == 0, known.stderr
    # The outcome (the CLI prints it as a Go map), not `Result <nil>`.
    assert "outcome:approved" in known.stdout and "tool_name:delete_file" in known.stdout
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"
    assert tool_part(final, "call_a")["output"] == "deleted a"


async def test_a_wait_behind_a_paused_turn_answers_at_once_naming_it(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Issue 19: a wait-mode request queued behind a turn awaiting approval hung for up to
    600 s with no hint. It answers at once, pending, with the turn it waits behind."""
    fake_model.script(
        cid, tool_call("delete_file", {"path": "a"}, id="call_a"), text("Gone."), text("Hi.")
    )
    first = await paused(api, cid)
    started = time.monotonic()
    response = await api.post(f"{path(cid)}/turns", json={"input": "hello?", "mode": "wait"})
    assert time.monotonic() - started < 10
    assert response.status_code == 200, response.text
    second = response.json()
    assert second["status"] == "pending", second
    assert second["queued_behind"] == {
        "turn_id": first["turn_id"],
        "status": "awaiting_approval",
        "status_url": first["status_url"],
    }
    # Not in submit mode, and not once nothing holds it.
    approval_id = first["pending_approvals"][0]["approval_id"]
    decided = await api.post(
        f"{first['status_url']}/approvals/{approval_id}", json={"approved": True}
    )
    assert decided.status_code in (200, 202), decided.text
    final = await until_status(api, second["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    assert final["queued_behind"] is None


async def test_a_python_wait_behind_a_paused_turn_answers_at_once_naming_it(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Issue 32: the wait that stops at a paused turn ahead lived in the gateway only, so
    `run_turn(mode="wait")` from Python hung for its whole `wait_timeout`. It answers as HTTP
    does: at once, pending, naming the paused turn."""
    fake_model.script(
        cid, tool_call("delete_file", {"path": "a"}, id="call_a"), text("Gone."), text("Hi.")
    )
    conversation = service.conversation(Gatekeeper, cid)
    first = await conversation.run_turn("go", wait_timeout=30)
    assert first.status == "awaiting_approval", first
    assert first.queued_behind is None
    started = time.monotonic()
    second = await conversation.run_turn("hello?", wait_timeout=60)
    assert time.monotonic() - started < 10
    assert second.status == "pending", second
    assert second.queued_behind == QueuedBehind(turn_id=first.turn_id, status="awaiting_approval")
    # `result` waits the same way; once the turn ahead is decided, nothing holds it.
    again = await conversation.result(second.turn_id, wait_timeout=60)
    assert again.queued_behind == second.queued_behind
    approval_id = tool_part(first.model_dump(mode="json"), "call_a")["approval"]["id"]
    decided = await api.post(
        f"{path(cid)}/turns/{first.turn_id}/approvals/{approval_id}", json={"approved": True}
    )
    assert decided.status_code in (200, 202), decided.text
    final = await conversation.result(second.turn_id, wait_timeout=60)
    assert final.status == "completed", final
    assert final.queued_behind is None


async def test_policy_function_decides_per_call(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("transfer", {"amount": 50}, id="call_small")
        + tool_call("transfer", {"amount": 500}, id="call_big"),
        text("Moved."),
    )
    turn = await paused(api, cid)
    assert [p["tool_call_id"] for p in turn["pending_approvals"]] == ["call_big"]
    # The small one ran meanwhile, without asking.
    small = turn
    for _ in range(100):
        if tool_part(small, "call_small")["state"] == "output-available":
            break
        await asyncio.sleep(0.1)
        small = (await api.get(turn["status_url"])).json()
    assert tool_part(small, "call_small")["output"] == "moved 50"
    assert small["status"] == "awaiting_approval"
    approval_id = turn["pending_approvals"][0]["approval_id"]
    await api.post(f"{turn['status_url']}/approvals/{approval_id}", json={"approved": True})
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert tool_part(final, "call_big")["output"] == "moved 500"


async def test_unanswered_approval_is_denied_after_its_timeout(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("launch", {"target": "moon"}, id="call_l"), text("Not today."))
    turn = await paused(api, cid)
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed"
    part = tool_part(final, "call_l")
    assert part["state"] == "output-denied"
    assert part["approval"]["reason"] == "no decision within 1 seconds"


async def test_cancel_a_paused_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}, id="call_x"))
    turn = await paused(api, cid)
    response = await api.post(f"{turn['status_url']}/cancel", json={"reason": "changed my mind"})
    assert response.status_code == 202
    final = await until_status(api, turn["status_url"], {"aborted"})
    assert final["status"] == "aborted"
    assert final["error"] == "changed my mind"
    assert final["pending_approvals"] == []
    approval_id = turn["pending_approvals"][0]["approval_id"]
    late = await api.post(f"{turn['status_url']}/approvals/{approval_id}", json={"approved": True})
    assert late.status_code == 409


async def test_bad_decisions_are_refused_with_the_field(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("hi"))
    turn = (await api.post(f"{path(cid)}/turns", json={"input": "x", "mode": "wait"})).json()
    response = await api.post(f"{turn['status_url']}/approvals/a1", json={"approved": "maybe"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "approved"
    missing = await api.post(f"{turn['status_url']}/approvals/a1", json={"approved": True})
    assert missing.status_code == 404


@pytest.fixture(scope="module")
def restart_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A gateway and a worker of their own (own task queue), so killing them hurts no one."""
    logs = tmp_path_factory.mktemp("approval-restart")
    with own_stack({**stack.env, "THINK_TASK_QUEUE": "think-approvals"}, logs) as own:
        yield own


async def test_a_paused_turn_survives_its_worker(
    restart_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Every worker SIGKILLed while the turn waits; once a new one polls, an approval
    completes the turn, run by the new worker (the dead one's sticky queue is given up after
    1 s: how soon is measured in docs/benchmarks.md, not asserted here, where a loaded
    machine would make it flaky)."""
    fake_model.script(cid, tool_call("delete_file", {"path": "k"}, id="call_k"), text("Gone."))
    async with httpx.AsyncClient(base_url=restart_stack.api_url, timeout=60) as api:
        turn = await paused(api, cid)
        await _settled_in_temporal(restart_stack, cid, turn["turn_id"])
        for worker in _live_workers(restart_stack):
            worker.kill()  # nothing was running, nothing is lost
        restart_stack.wait_polling(restart_stack.start_worker())
        approval_id = turn["pending_approvals"][0]["approval_id"]
        response = await api.post(
            f"{turn['status_url']}/approvals/{approval_id}", json={"approved": True}
        )
        assert response.status_code in (200, 202), response.text
        final = await until_status(api, turn["status_url"], {"completed", "error"})
        assert final["status"] == "completed", final
        assert tool_part(final, "call_k")["output"] == "deleted k"
        assert fake_model.calls(cid) == 2


async def test_an_answer_needs_no_worker(
    restart_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """With no worker at all, a decision is recorded and answered within a second (202); a
    second one is refused (409); the turn applies the first once a worker runs again."""
    fake_model.script(cid, tool_call("delete_file", {"path": "n"}, id="call_n"), text("Gone."))
    async with httpx.AsyncClient(base_url=restart_stack.api_url, timeout=60) as api:
        turn = await paused(api, cid)
        await _settled_in_temporal(restart_stack, cid, turn["turn_id"])
        for worker in _live_workers(restart_stack):
            worker.kill()
        approval_id = turn["pending_approvals"][0]["approval_id"]
        url = f"{turn['status_url']}/approvals/{approval_id}"
        started = time.monotonic()
        first = await api.post(url, json={"approved": True})
        took = time.monotonic() - started
        assert first.status_code == 202, first.text
        assert took < 1.0, f"the decision took {took:.2f} s to answer with no worker"
        second = await api.post(url, json={"approved": False, "reason": "too late"})
        assert second.status_code == 409, second.text
        assert (await api.get(turn["status_url"])).json()["status"] == "awaiting_approval"
        restart_stack.wait_polling(restart_stack.start_worker())
        final = await until_status(api, turn["status_url"], {"completed", "error"})
        assert final["status"] == "completed", final
        assert tool_part(final, "call_n")["output"] == "deleted n"  # the first decision stood


async def _settled_in_temporal(stack: Stack, cid: str, turn_id: str) -> None:
    """Until the paused turn's workflow task has completed: Postgres says `awaiting_approval`
    a moment before (the step records it inside the task), and a kill in between is a crash
    mid-step, not a kill of a paused turn."""
    client = await connect(Settings.from_env(stack.env))
    handle = client.get_workflow_handle(turn_workflow_id(AGENT, cid, turn_id))
    for _ in range(200):
        described = await handle.describe()
        if not described.raw_description.HasField("pending_workflow_task"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the paused turn's workflow task never completed")


def _live_workers(stack: Stack) -> list[Any]:
    return [p for p in stack.processes if p.name == "worker" and p.popen.poll() is None]


async def test_a_terminated_turn_never_blocks_its_conversation(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """An operator terminates a paused turn's workflow from the Temporal UI: the workers'
    sweeper ends the turn `error` (keeping what it had), and the turn queued behind it runs."""
    fake_model.script(cid, tool_call("delete_file", {"path": "t"}, id="call_t"), text("next"))
    turn = await paused(api, cid)
    queued = (await api.post(f"{path(cid)}/turns", json={"input": "and then?"})).json()
    handle = temporal.get_workflow_handle(turn_workflow_id(AGENT, cid, turn["turn_id"]))
    await handle.terminate(reason="stuck, says the operator")
    final = await until_status(api, turn["status_url"], {"error"}, within=20)
    assert "terminated" in final["error"]
    assert tool_part(final, "call_t")["state"] == "approval-requested"  # what it had is kept
    _, events = await read_stream(api, turn["stream_url"])
    assert chunks(events)[-1]["type"] == "error" and events[-1].data == "[DONE]"
    after = await until_status(api, queued["status_url"], {"completed", "error"}, within=20)
    assert after["status"] == "completed", after
    assert after["message"]["parts"][-1]["text"] == "next"
