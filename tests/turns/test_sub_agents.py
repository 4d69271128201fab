"""Sub-agents and agent tools, end to end on the real stack (the model scripted): a parent
turn delegates to a child agent's turn, which runs in a child conversation reachable over HTTP,
streams its progress into the parent's stream, survives a worker SIGKILL with exactly one child
turn, is cancelled with its parent, and reports its failure to the parent's model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment

from tests._ai_sdk import reconstruct
from tests._replay import HISTORIES, replayer
from tests._sse import chunks, read_stream, read_until
from tests._stack import Stack, bearer_client, extra_gateway, own_stack
from tests._turn_helpers import CallbackRecorder, sent, tool_part, until_status, wait_turn
from tests.agents import Lead, Researcher
from think import Think, ThinkService, Tool, UserError, agent_tool
from think._settings import Settings
from think.agent import AgentRegistry
from think.agent._agent_tool import child_conversation_id
from think.dev import SEARCH_ATTRIBUTES as DEV_SEARCH_ATTRIBUTES
from think.engine.activities._agent_tool import AgentToolCalls
from think.engine.activities._resources import ActivityResources
from think.engine.activities._tool_call import ToolCalls
from think.exceptions import ConfigurationError
from think.storage import Delegation, TurnRecord, TurnRequest
from think.testing import FakeOpenAIServer, disconnect, error, reply, stall, text, tool_call
from think.turns import DispatchFailed, start_turn_workflow
from think.workflows.inputs import AgentToolInput
from think.workflows.names import SEARCH_ATTRIBUTES, turn_workflow_id

WORDS = [f"fact{i} " for i in range(30)]


def child_of(cid: str, name: str = "research") -> str:
    """The documented form of a child conversation's id: parent agent, conversation, name."""
    return f"lead.{cid}.{name}"


def preliminary(got: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [
        c
        for c in got
        if c["type"] == "tool-output-available"
        and c.get("toolCallId") == call_id
        and c.get("preliminary") is True
    ]


async def child_turns(api: httpx.AsyncClient, child: str) -> list[dict[str, Any]]:
    found = await api.get(f"/v1/agents/researcher/conversations/{child}/turns")
    assert found.status_code == 200, found.text
    turns: list[dict[str, Any]] = found.json()["turns"]
    return turns


async def test_a_parent_delegates_and_the_child_answers(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    child = child_of(cid)
    fake_model.script(
        cid,
        tool_call("research", {"input": "find the answer"}, id="call_r1"),
        text("The researcher says 42."),
        tool_call("research", {"input": "and the question?"}, id="call_r2"),
        text("Still 42."),
    )
    fake_model.script(child, text("Finding: ", "42."), text("Unknown."))
    turn = await wait_turn(api, "lead", cid, "what is it?", status="completed")
    part = tool_part(turn, "call_r1")
    assert part["type"] == "tool-research" and part["state"] == "output-available"
    child_turn = part["output"]["turn_id"]
    assert part["output"] == {
        "agent": "researcher",
        "conversation_id": child,
        "turn_id": child_turn,
        "status": "completed",
        "text": "Finding: 42.",
    }
    assert "preliminary" not in part
    # The parent's model read the child's answer as the tool's result.
    tool_message = next(m for m in sent(fake_model, cid, 1) if m["role"] == "tool")
    assert json.loads(tool_message["content"])["text"] == "Finding: 42."
    assert turn["message"]["parts"][-1]["text"] == "The researcher says 42."

    # Drill-in: the child is a normal conversation of the child agent, hosted without being
    # listed in THINK_AGENTS, under the parent's tenant.
    listed = (await api.get(f"/v1/agents/researcher/conversations/{child}/messages")).json()
    assert [(m["role"], m["parts"][-1]["text"]) for m in listed["messages"]] == [
        ("user", "find the answer"),
        ("assistant", "Finding: 42."),
    ]
    assert [t["turn_id"] for t in await child_turns(api, child)] == [child_turn]
    assert (await child_turns(api, child))[0]["idempotency_key"] == f"{turn['turn_id']}:call_r1"

    # Linked pages in the Temporal UI: the child's turn names its parent's.
    handle = temporal.get_workflow_handle(turn_workflow_id("researcher", child, child_turn))
    described = await handle.describe()
    attrs = {p.key.name: p.value for p in described.typed_search_attributes}
    assert attrs["ThinkParentTurn"] == turn["turn_id"]
    assert turn_workflow_id("lead", cid, turn["turn_id"]) in (
        await described.static_details() or ""
    )
    # The parent waited on the child's Signal, not in an activity: all its work is local
    # activities (markers), and the Signal is in its history.
    parent = temporal.get_workflow_handle(turn_workflow_id("lead", cid, turn["turn_id"]))
    history = [e async for e in parent.fetch_history_events()]
    assert not [e for e in history if e.HasField("activity_task_scheduled_event_attributes")]
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in history
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert signals == ["child_turn_ended"]

    # The child is retained: a second delegation from a later turn sees the first exchange.
    again = await wait_turn(api, "lead", cid, "and?", status="completed")
    assert tool_part(again, "call_r2")["output"]["text"] == "Unknown."
    child_saw = [m.get("content") for m in sent(fake_model, child, 1)]
    assert "find the answer" in child_saw and "Finding: 42." in child_saw
    assert len(await child_turns(api, child)) == 2


async def test_a_fresh_child_per_call(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("research_fresh", {"input": "one"}, id="call_f1")
        + tool_call("research_fresh", {"input": "two"}, id="call_f2"),
        text("both done"),
    )
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    first, second = tool_part(turn, "call_f1")["output"], tool_part(turn, "call_f2")["output"]
    assert first["conversation_id"] == child_of(cid, "research_fresh.call_f1")
    assert second["conversation_id"] == child_of(cid, "research_fresh.call_f2")
    # Unscripted, the fake model echoes: each child saw only its own task.
    assert (first["text"], second["text"]) == ("echo: one", "echo: two")


async def test_child_progress_reaches_the_parent_stream(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    child = child_of(cid)
    fake_model.script(
        cid, tool_call("research", {"input": "dig"}, id="call_p"), text("Summarised.")
    )
    fake_model.script(child, reply(text(*WORDS), delay=0.05))  # ~1.5 s of streaming
    started = await api.post(f"/v1/agents/lead/conversations/{cid}/turns", json={"input": "go"})
    turn = started.json()

    # While the child streams (before the parent's turn has ended), its answer so far is in
    # the parent's stream as the AI SDK's preliminary tool output, growing.
    def partial(got: list[dict[str, Any]]) -> bool:
        return any(len(c["output"]["text"]) > 20 for c in preliminary(got, "call_p"))

    live = await asyncio.wait_for(read_until(api, turn["stream_url"], partial), timeout=30)
    assert (await api.get(turn["status_url"])).json()["status"] == "running"
    # Meanwhile the parent holds no worker slot: no activity, no workflow task in flight.
    parent = temporal.get_workflow_handle(turn_workflow_id("lead", cid, turn["turn_id"]))
    described = (await parent.describe()).raw_description
    assert list(described.pending_activities) == []
    assert not described.HasField("pending_workflow_task")
    outputs = [c["output"] for c in preliminary(live, "call_p")]
    assert outputs[0]["text"] == ""  # the drill-in link arrives first
    assert {o["conversation_id"] for o in outputs} == {child}
    assert all(o["status"] == "running" for o in outputs)
    assert "".join(WORDS).startswith(outputs[-1]["text"])

    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    body, events = await read_stream(api, turn["stream_url"])
    got = chunks(events)
    last = [c for c in got if c["type"] == "tool-output-available"][-1]
    assert "preliminary" not in last and last["output"]["text"] == "".join(WORDS)
    # An AI SDK client rebuilds exactly the stored message from the stream.
    rebuilt = await reconstruct(body)
    assert rebuilt["message"] == final["message"]


async def test_a_child_that_errors_is_a_tool_error_for_the_parent(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    child = child_of(cid)
    fake_model.script(
        cid, tool_call("research", {"input": "dig"}, id="call_e"), text("It failed; sorry.")
    )
    fake_model.script(child, error(401, "bad key"))
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    part = tool_part(turn, "call_e")
    assert part["state"] == "output-error"
    assert "agent 'researcher' failed" in part["errorText"] and child in part["errorText"]
    tool_message = next(m for m in sent(fake_model, cid, 1) if m["role"] == "tool")
    assert "failed" in tool_message["content"]
    assert turn["message"]["parts"][-1]["text"] == "It failed; sorry."
    assert [t["status"] for t in await child_turns(api, child)] == ["error"]


async def test_cancelling_the_parent_cancels_the_child(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    child = child_of(cid)
    fake_model.script(cid, tool_call("research", {"input": "long"}, id="call_c"))
    fake_model.script(child, text("starting ") + stall(60))
    turn = (
        await api.post(f"/v1/agents/lead/conversations/{cid}/turns", json={"input": "go"})
    ).json()
    await asyncio.wait_for(
        read_until(api, turn["stream_url"], lambda got: bool(preliminary(got, "call_c"))), 30
    )
    for _ in range(100):
        turns = await child_turns(api, child)
        if turns and turns[0]["status"] == "running":
            break
        await asyncio.sleep(0.1)
    cancel = await api.post(f"{turn['status_url']}/cancel", json={"reason": "user left"})
    assert cancel.status_code == 202
    final = await until_status(api, turn["status_url"], {"aborted"}, within=15)
    assert final["status"] == "aborted", final
    ended = await until_status(
        api,
        f"/v1/agents/researcher/conversations/{child}/turns/{turns[0]['turn_id']}",
        {"aborted"},
        within=15,
    )
    assert ended["status"] == "aborted", ended
    assert turn["turn_id"] in ended["error"]


async def test_two_parents_delegate_in_parallel(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    cids = [f"{cid}-a", f"{cid}-b"]
    for c in cids:
        fake_model.script(
            c, tool_call("research", {"input": f"task {c}"}, id="call_x"), text(f"done {c}")
        )
        fake_model.script(child_of(c), reply(text(f"answer for {c} ", *WORDS[:10]), delay=0.03))
    turns = await asyncio.gather(
        *(wait_turn(api, "lead", c, "go", status="completed") for c in cids)
    )
    for c, turn in zip(cids, turns, strict=True):
        output = tool_part(turn, "call_x")["output"]
        assert output["conversation_id"] == child_of(c)
        assert output["text"] == f"answer for {c} " + "".join(WORDS[:10])
        assert turn["message"]["parts"][-1]["text"] == f"done {c}"


async def test_the_chat_callback_contract(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`sub_agent(...).chat()`: on_start with the request id, every chunk, on_interrupted
    when an attempt is dropped and a retry takes the step over, and then one terminal
    callback: on_done, or on_error (never on_interrupted)."""
    parent = service.conversation("lead", cid)
    child = parent.sub_agent(Researcher, "child-1")
    assert (child.agent.name, child.conversation_id) == ("researcher", child_of(cid, "child-1"))
    fake_model.script(child.conversation_id, text("half an ") + disconnect(), text("whole."))
    calls: list[Any] = []

    result = await child.chat("research this", CallbackRecorder(calls))
    assert result.status == "completed" and result.message is not None
    assert calls[0] == ("start", result.request_id)
    # The interruption comes right after the chunk that resets the step, and is not the end.
    assert calls[calls.index("reset-step") + 1] == "interrupted"
    assert calls.index("interrupted") < calls.index("finish") < len(calls) - 1
    assert calls[-1] == "done" and calls.count("done") == 1
    assert result.message.parts[-1]["text"] == "whole."

    # A failed turn ends with on_error, whatever came before.
    calls.clear()
    fake_model.script(child.conversation_id, error(401, "bad key"))
    failed = await child.chat("again", CallbackRecorder(calls))
    assert failed.status == "error"
    assert calls[-1][0] == "error" and "interrupted" not in calls and "done" not in calls

    # Cancelling the awaiting task (outside any turn) cancels the turn it started.
    calls.clear()
    fake_model.script(child.conversation_id, text("slow ") + stall(60))
    task = asyncio.create_task(child.chat("long", CallbackRecorder(calls)))
    for _ in range(200):
        if "text-delta" in calls:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    turn_id = calls[0][1]
    for _ in range(100):
        got = await child.get_submission(turn_id)
        if got is not None and got.status == "aborted":
            break
        await asyncio.sleep(0.1)
    assert got is not None and got.status == "aborted", got
    assert got.error == "the caller was cancelled"


async def test_sub_agent_by_hand_from_a_tool(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The low-level path inside a parent's tool (`self.sub_agent(...).chat(...)`): the
    child's conversation is found from the turn being served."""
    fake_model.script(cid, tool_call("ask_by_hand", {"task": "by hand"}, id="call_h"), text("ok"))
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    output = tool_part(turn, "call_h")["output"]
    assert output == {
        "conversation_id": child_of(cid, "by-hand"),
        "status": "completed",
        "calls": ["start", "start", "finish", "done"],
        "text": "echo: by hand",
    }


async def test_abort_all_requests_and_a_cancelled_wait(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation("helper", cid)
    fake_model.script(cid, text("one ") + stall(60))  # the second never reaches the model
    first = await conv.submit_messages("first")
    second = await conv.submit_messages("second")
    for _ in range(100):
        if (await conv.get_submission(first.turn_id)).status == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.05)
    cancelled = await conv.abort_all_requests("closing")
    assert sorted(cancelled) == sorted([first.turn_id, second.turn_id])
    assert (await conv.result(first.turn_id, wait_timeout=15)).status == "aborted"
    assert (await conv.result(second.turn_id, wait_timeout=15)).status == "aborted"
    assert await conv.abort_all_requests() == []

    # save_messages awaited by a task that is cancelled: the turn is cancelled too.
    fake_model.script(cid, text("slow ") + stall(60))
    task = asyncio.create_task(conv.save_messages("third"))
    for _ in range(100):
        running = await conv.list_submissions(status=["running"])
        if running:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await conv.result(running[0].turn_id, wait_timeout=15)).status == "aborted"


def test_migrate_and_the_dev_server_register_both_attributes() -> None:
    """`think migrate` adds what `SEARCH_ATTRIBUTES` names, and `think dev` starts with it."""
    assert {"ThinkTenant", "ThinkParentTurn"} <= set(SEARCH_ATTRIBUTES)
    assert set(DEV_SEARCH_ATTRIBUTES) == set(SEARCH_ATTRIBUTES)


def test_child_ids_and_hosting() -> None:
    assert child_conversation_id("lead", "c1", "research") == "lead.c1.research"
    long = child_conversation_id("lead", "c" * 120, "research")
    assert long.startswith("sub.") and long == child_conversation_id("lead", "c" * 120, "research")
    assert long != child_conversation_id("boss", "c" * 120, "research")
    with pytest.raises(UserError, match="not a valid id"):
        child_conversation_id("lead", "c1", "no spaces")
    registry = AgentRegistry([Lead])
    assert registry.get("researcher") is Researcher

    # Hosting follows delegation down: an agent tool's agent, and that agent's sub_agents.
    class Fact(Think):
        name = "fact_checker"

    class Writer(Think):
        name = "writer"
        sub_agents = (Fact,)

    class Editor(Think):
        name = "editor"

        def get_tools(self) -> list[Tool]:
            return [agent_tool(Writer)]

    nested = AgentRegistry([Editor])
    assert {a.name for a in nested} == {"editor", "writer", "fact_checker"}
    assert nested.get("fact_checker") is Fact

    class Impostor(Researcher):
        name = "researcher"

    class Boss(Lead):
        name = "boss"
        sub_agents = (Impostor,)

    with pytest.raises(ConfigurationError, match="named 'researcher'"):
        AgentRegistry([Boss])


@pytest.fixture(scope="module")
def crash_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A gateway and a worker of their own (own task queue), so killing them hurts no one."""
    logs = tmp_path_factory.mktemp("sub-agent-crash")
    with own_stack({**stack.env, "THINK_TASK_QUEUE": "think-sub-agent-crash"}, logs) as own:
        yield own


async def test_sigkill_mid_child_keeps_one_child_turn(
    crash_stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    child = child_of(cid)
    slow = reply(text(*WORDS), delay=0.06)  # ~2 s of streaming
    fake_model.script(cid, tool_call("research", {"input": "dig"}, id="call_k"), text("Done."))
    fake_model.script(child, slow, slow)
    async with httpx.AsyncClient(base_url=crash_stack.api_url, timeout=60) as api:
        turn = (
            await api.post(f"/v1/agents/lead/conversations/{cid}/turns", json={"input": "go"})
        ).json()

        def some_words(got: list[dict[str, Any]]) -> bool:
            return any(len(c["output"]["text"]) > 30 for c in preliminary(got, "call_k"))

        await asyncio.wait_for(read_until(api, turn["stream_url"], some_words), timeout=30)
        crash_stack.replace_worker()  # SIGKILL, mid-child

        final = await until_status(api, turn["status_url"], {"completed", "error"}, within=60)
        assert final["status"] == "completed", final
        output = tool_part(final, "call_k")["output"]
        assert output["status"] == "completed" and output["text"] == "".join(WORDS)
        turns = await child_turns(api, child)
        assert [t["turn_id"] for t in turns] == [output["turn_id"]]  # one child turn
        messages = (await api.get(f"/v1/agents/researcher/conversations/{child}/messages")).json()
        answers = [m for m in messages["messages"] if m["role"] == "assistant"]
        assert len(answers) == 1 and answers[0]["parts"][-1]["text"] == "".join(WORDS)
        assert fake_model.calls(child) == 2  # the killed attempt and its retry
        assert fake_model.calls(cid) == 2  # the parent's model: before and after the tool
        body, _ = await read_stream(api, turn["stream_url"])
        assert (await reconstruct(body))["message"] == final["message"]


def test_the_example_runs(
    stack: Stack, fake_model: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory, cid: str
) -> None:
    """examples/sub_agents.py as its docstring runs it: a worker hosting only
    `examples.sub_agents:Lead` (Researcher comes with it), then `python -m examples.sub_agents`."""
    env = {
        **stack.env,
        "THINK_AGENTS": "examples.sub_agents:Lead",
        "THINK_TASK_QUEUE": "think-sub-agents-example",
    }
    own = Stack(env=env, logs=tmp_path_factory.mktemp("sub-agents-example"))
    child = f"lead.{cid}.research"
    fake_model.script(
        cid,
        tool_call("research", {"input": "Temporal, briefly"}, id="call_t"),
        text("Temporal makes workflows durable."),
    )
    fake_model.script(child, text("It replays history."), text("Durable code."))
    try:
        own.start_worker()
        ran = subprocess.run(
            [sys.executable, "-m", "examples.sub_agents", cid],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        own.stop()
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "research (completed): It replays history."
    assert lines[1] == f"  drill in: /v1/agents/researcher/conversations/{child}"
    assert lines[2] == "lead: Temporal makes workflows durable."
    assert lines[3].startswith("researcher turn ") and lines[3].endswith(": Durable code.")
    # The child remembered the delegation when asked directly.
    assert "Temporal, briefly" in [m.get("content") for m in sent(fake_model, child, 1)]


async def test_a_child_past_the_tools_timeout_is_cancelled(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """No Signal comes from a child that never ends: the parent's periodic look in Postgres
    applies the agent tool's timeout (1 s here), cancels the child and tells the model."""
    child = child_of(cid, "research_quick")
    fake_model.script(
        cid, tool_call("research_quick", {"input": "forever"}, id="call_q"), text("Gave up.")
    )
    fake_model.script(child, text("thinking ") + stall(60))
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    part = tool_part(turn, "call_q")
    assert part["state"] == "output-error"
    assert "was cancelled: agent tool 'research_quick' timed out" in part["errorText"]
    assert "no answer within 1 s" in part["errorText"]
    (child_turn,) = await child_turns(api, child)
    ended = await until_status(
        api,
        f"/v1/agents/researcher/conversations/{child}/turns/{child_turn['turn_id']}",
        {"aborted"},
    )
    assert ended["status"] == "aborted" and "timed out" in ended["error"]
    assert turn["message"]["parts"][-1]["text"] == "Gave up."


def test_the_docs_show_the_example_that_runs(root: Path) -> None:
    doc = (root / "docs" / "sub-agents.md").read_text()
    example = (root / "examples" / "sub_agents.py").read_text()
    block = re.findall(r"```python\n(.*?)```", doc, re.S)[0]
    assert "class Lead(Think):" in block and block in example


async def test_delegated_turn_histories_replay(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """A delegating turn's history and its child's replay in the sandbox (recorded into
    tests/histories/ with THINK_RECORD_HISTORIES=1, as tests/durability/test_replay.py does)."""
    child = child_of(cid)
    fake_model.script(cid, tool_call("research", {"input": "dig"}, id="call_h"), text("ok"))
    fake_model.script(child, text("found"))
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    child_turn = tool_part(turn, "call_h")["output"]["turn_id"]
    histories: dict[str, WorkflowHistory] = {}
    for name, wid in (
        ("agent-tool-parent-turn", turn_workflow_id("lead", cid, turn["turn_id"])),
        ("agent-tool-child-turn", turn_workflow_id("researcher", child, child_turn)),
    ):
        handle = temporal.get_workflow_handle(wid)
        await handle.result()
        histories[name] = await handle.fetch_history()
    for name, history in histories.items():
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None, name
        path = HISTORIES / f"{name}.json"
        if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
            path.write_text(history.to_json())


async def test_run_agent_tool_from_code(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`run_agent_tool` delegates from code to the child the model's tool uses (same name,
    same conversation), and answers what the tool would have recorded."""
    child = child_of(cid)
    fake_model.script(cid, tool_call("research", {"input": "first"}, id="call_1"), text("ok"))
    fake_model.script(child, text("first answer"), text("second answer"), error(401, "no"))
    await wait_turn(api, "lead", cid, "go", status="completed")
    parent = service.conversation("lead", cid)
    result = await parent.run_agent_tool(Researcher, "second", name="research")
    assert result.output() == {
        "agent": "researcher",
        "conversation_id": child,
        "turn_id": result.turn_id,
        "status": "completed",
        "text": "second answer",
    }
    assert result.error is None
    assert "first answer" in [m.get("content") for m in sent(fake_model, child, 1)]
    failed = await parent.run_agent_tool(Researcher, "third", name="research")
    assert failed.status == "error" and failed.error


async def test_a_retried_start_reattaches_to_the_same_child(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """What a parent retried after a crash does before its delegation was recorded in its
    history: `agent_tool_start` runs again (here, by hand, while the child runs) and finds the
    child's turn by its key instead of admitting a second one."""
    child = child_of(cid)
    fake_model.script(cid, tool_call("research", {"input": "long"}, id="call_a"), text("ok"))
    fake_model.script(child, text("working ") + stall(60))
    turn = (
        await api.post(f"/v1/agents/lead/conversations/{cid}/turns", json={"input": "go"})
    ).json()
    await asyncio.wait_for(
        read_until(api, turn["stream_url"], lambda got: bool(preliminary(got, "call_a"))), 30
    )
    (first,) = await child_turns(api, child)
    resources = ActivityResources(
        store=service.store,
        registry=service.registry,
        settings=service.settings,
        temporal=service.temporal,
    )
    calls = AgentToolCalls(resources, ToolCalls(resources))
    again = await ActivityEnvironment().run(
        calls.start,
        AgentToolInput(
            turn_id=turn["turn_id"], step=0, tool_call_id="call_a", tool_name="research"
        ),
    )
    assert again.child_turn_id == first["turn_id"]
    assert [t["turn_id"] for t in await child_turns(api, child)] == [first["turn_id"]]
    await api.post(f"{turn['status_url']}/cancel", json={})
    assert (await until_status(api, turn["status_url"], {"aborted"}))["status"] == "aborted"


async def test_a_namespace_without_the_parent_attribute_still_runs_children(
    settings: Settings, temporal: Client, cid: str
) -> None:
    """A Temporal namespace set up before sub-agents (every attribute but `ThinkParentTurn`,
    `ThinkTenant` included; `think migrate` not run since) still starts a child's turn, only
    without that attribute."""
    namespace = f"old-{cid}"
    await temporal.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    await temporal.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={
                name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
                for name in SEARCH_ATTRIBUTES
                if name != "ThinkParentTurn"
            },
        )
    )
    old = await Client.connect(
        settings.temporal_address, namespace=namespace, data_converter=pydantic_data_converter
    )
    now = datetime.now(UTC)
    turn = TurnRecord(
        id="turn_child",
        conversation_uid="u",
        conversation_id=child_of(cid),
        tenant="default",
        agent="researcher",
        idempotency_key="turn_parent:call_1",
        request_hash="h",
        request=TurnRequest(
            messages=[],
            delegated_by=Delegation(
                turn_id="turn_parent",
                agent="lead",
                conversation_id=cid,
                tool_call_id="call_1",
                tool_name="research",
            ),
        ),
        status="pending",
        created_at=now,
        started_at=None,
        completed_at=None,
        message_id="msg_1",
        parent_id=None,
        message=None,
        error=None,
        steps_done=0,
        usage={},
    )
    for _ in range(50):  # a new namespace's attributes take a moment to be usable
        try:
            await start_turn_workflow(old, "nobody-polls-this", turn)
            break
        except DispatchFailed:
            await asyncio.sleep(0.2)
    handle = old.get_workflow_handle(
        turn_workflow_id("researcher", child_of(cid), turn.id, tenant=turn.tenant)
    )
    described = await handle.describe()
    attrs = {p.key.name: p.value for p in described.typed_search_attributes}
    assert attrs["ThinkAgent"] == "researcher" and "ThinkParentTurn" not in attrs
    assert attrs["ThinkTenant"] == "default"
    assert "delegated by lead" in (await described.static_summary() or "")
    await handle.terminate("test over")


async def test_a_chain_of_delegations_stops_at_the_depth_limit(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """An agent that delegates to itself: its turns 2 levels below the top (its
    `max_delegation_depth`) get a tool error instead of a third child."""
    levels = [cid]
    for _ in range(3):
        levels.append(child_conversation_id("recursive", levels[-1], "deeper"))
    for depth, conversation in enumerate(levels[:3]):
        fake_model.script(
            conversation,
            tool_call("deeper", {"input": f"level {depth + 1}"}, id=f"call_{depth}"),
            text(f"answer {depth}"),
        )
    turn = await wait_turn(api, "recursive", cid, "go", status="completed")
    assert tool_part(turn, "call_0")["output"]["text"] == "answer 1"
    bottom = await api.get(f"/v1/agents/recursive/conversations/{levels[2]}/turns")
    (bottom_turn,) = bottom.json()["turns"]
    part = tool_part(bottom_turn, "call_2")
    assert part["state"] == "output-error"
    assert "max_delegation_depth (2)" in part["errorText"]
    # No third level: its conversation was never created.
    missing = await api.get(f"/v1/agents/recursive/conversations/{levels[3]}/turns")
    assert missing.status_code == 404, missing.text


LAB = "acme/lab"
"""A tenant whose name a workflow id percent-encodes (`acme%2Flab`)."""


@pytest.fixture(scope="module")
def lab_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway whose keys map two tenants, neither of them `default`."""
    env = {**stack.env, "THINK_API_KEYS": f"lab-key:{LAB},acme-key:acme"}
    with extra_gateway(env, tmp_path_factory.mktemp("lab")) as url:
        yield url


async def test_a_tenants_sub_agent_delegates_streams_and_cancels(
    lab_api: str, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """Sub-agents of a tenant that is not `default`: every workflow id of the delegation
    (the child's own, the parent's that its Signal goes to, the children a cancel reaches)
    carries the tenant, so the child streams into its parent, wakes it with its Signal, and
    is cancelled with it; another tenant sees none of it."""
    child = child_of(cid)
    fake_model.script(
        cid,
        tool_call("research", {"input": "dig"}, id="call_t"),
        tool_call("ask_by_hand", {"task": "by hand"}, id="call_h"),
        text("Summarised."),
        tool_call("research", {"input": "long"}, id="call_c"),
    )
    fake_model.script(child, reply(text(*WORDS), delay=0.05), text("starting ") + stall(60))
    base = f"/v1/agents/lead/conversations/{cid}"
    async with bearer_client(lab_api, "lab-key") as lab, bearer_client(lab_api, "acme-key") as acme:
        turn = (await lab.post(f"{base}/turns", json={"input": "go"})).json()

        def partial(got: list[dict[str, Any]]) -> bool:
            return any(len(c["output"]["text"]) > 20 for c in preliminary(got, "call_t"))

        await asyncio.wait_for(read_until(lab, turn["stream_url"], partial), timeout=30)
        final = await until_status(lab, turn["status_url"], {"completed", "error"})
        assert final["status"] == "completed", final
        output = tool_part(final, "call_t")["output"]
        assert (output["conversation_id"], output["text"]) == (child, "".join(WORDS))
        # `sub_agent(...).chat()` from the parent's tool: the child under the parent's tenant.
        by_hand = tool_part(final, "call_h")["output"]
        assert (by_hand["status"], by_hand["text"]) == ("completed", "echo: by hand")
        body, _ = await read_stream(lab, turn["stream_url"])
        assert (await reconstruct(body))["message"] == final["message"]

        # Drill-in: the children are the tenant's conversations, and no other tenant's.
        for path in (child, child_of(cid, "by-hand")):
            url = f"/v1/agents/researcher/conversations/{path}/turns"
            assert (await lab.get(url)).status_code == 200
            assert (await acme.get(url)).status_code == 404

        # In Temporal: the child's page names its tenant and its parent, whose id carries the
        # tenant too; the parent was woken by the child's Signal (sent to that id).
        parent_id = turn_workflow_id("lead", cid, turn["turn_id"], tenant=LAB)
        assert parent_id.startswith("turn:acme%2Flab:lead:")
        child_id = turn_workflow_id("researcher", child, output["turn_id"], tenant=LAB)
        described = await temporal.get_workflow_handle(child_id).describe()
        attrs = {p.key.name: p.value for p in described.typed_search_attributes}
        assert attrs["ThinkTenant"] == LAB and attrs["ThinkParentTurn"] == turn["turn_id"]
        assert parent_id in (await described.static_details() or "")
        history = [e async for e in temporal.get_workflow_handle(parent_id).fetch_history_events()]
        signals = [
            e.workflow_execution_signaled_event_attributes.signal_name
            for e in history
            if e.HasField("workflow_execution_signaled_event_attributes")
        ]
        # One Signal, the agent tool's child's (`chat()` from a tool is not a delegation).
        assert signals == ["child_turn_ended"]
        query = f"ThinkTenant = '{LAB}' AND ThinkParentTurn = '{turn['turn_id']}'"
        for _ in range(50):  # visibility catches up with the start a moment later
            listed = [w.id async for w in temporal.list_workflows(query)]
            if listed:
                break
            await asyncio.sleep(0.1)
        assert listed == [child_id]
        # No workflow under the default tenant's id of the same turn.
        with pytest.raises(RPCError):
            await temporal.get_workflow_handle(
                turn_workflow_id("lead", cid, turn["turn_id"])
            ).describe()

        # Cancelling the tenant's parent cancels its running child.
        second = (await lab.post(f"{base}/turns", json={"input": "again"})).json()
        await asyncio.wait_for(
            read_until(lab, second["stream_url"], lambda got: bool(preliminary(got, "call_c"))),
            30,
        )
        url = f"/v1/agents/researcher/conversations/{child}/turns"
        for _ in range(100):
            running = [t for t in (await lab.get(url)).json()["turns"] if t["status"] == "running"]
            if running:
                break
            await asyncio.sleep(0.1)
        (child_turn,) = running
        cancel = await lab.post(f"{second['status_url']}/cancel", json={"reason": "user left"})
        assert cancel.status_code == 202, cancel.text
        ended = await until_status(lab, second["status_url"], {"aborted"}, within=15)
        assert ended["status"] == "aborted", ended
        child_ended = await until_status(
            lab, f"{url}/{child_turn['turn_id']}", {"aborted"}, within=15
        )
        assert child_ended["status"] == "aborted", child_ended
        assert second["turn_id"] in child_ended["error"]
        handle = temporal.get_workflow_handle(
            turn_workflow_id("researcher", child, child_turn["turn_id"], tenant=LAB)
        )
        for _ in range(100):
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.1)
        assert (await handle.describe()).status != WorkflowExecutionStatus.RUNNING
