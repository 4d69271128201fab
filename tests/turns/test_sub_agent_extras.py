"""The sub-agent extras, end to end on the real stack (the model scripted), each a counterpart
of Think's own tests: a cap on the agent tools that run at once (Think's
max-concurrent-agent-tools.test.ts), a child's typed output and a skipped child reported as an
error (agent-tools.test.ts), and agent tools that wait for a person's approval."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
from temporalio.client import Client

from tests._replay import HISTORIES, replayer
from tests._turn_helpers import sent, slow, streaming, tool_part, until_status, wait_turn
from tests.agents import Researcher
from tests.sub_agent_agents import Analyst, Dispatcher, Finding
from think import ThinkService
from think.engine.activities._agent_tool import over_cap
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import turn_workflow_id


def child_of(cid: str, name: str) -> str:
    """A child conversation of a `dispatcher` conversation (docs/sub-agents.md)."""
    return f"dispatcher.{cid}.{name}"


async def turns_of(api: httpx.AsyncClient, agent: str, conversation: str) -> list[dict[str, Any]]:
    """The turns of a conversation; none for one that was never created."""
    found = await api.get(f"/v1/agents/{agent}/conversations/{conversation}/turns")
    if found.status_code == 404:
        return []
    assert found.status_code == 200, found.text
    turns: list[dict[str, Any]] = found.json()["turns"]
    return turns


def tool_results(fake_model: FakeOpenAIServer, cid: str, call: int) -> dict[str, str]:
    """What the parent's model read as each tool call's result, by tool call id."""
    return {
        m["tool_call_id"]: m["content"] for m in sent(fake_model, cid, call) if m["role"] == "tool"
    }


async def queued_behind(api: httpx.AsyncClient, child: str) -> None:
    """Until a second turn (the delegated one) waits in the child's queue."""
    for _ in range(300):
        if len(await turns_of(api, "researcher", child)) == 2:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no second turn in {child}")


def three_research_calls() -> Any:
    return (
        tool_call("research", {"input": "one"}, id="call_a")
        + tool_call("research", {"input": "two"}, id="call_b")
        + tool_call("research", {"input": "three"}, id="call_c")
    )


# -- max_concurrent_agent_tools (Think: maxConcurrentAgentTools) ------------------------------


async def test_over_cap_agent_tool_calls_fail_fast_with_a_clear_error(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think: "rejects over-cap runs fail-fast with a clear error (no queue)". Of three agent
    tool calls made at once under a cap of two, the first two run and the third is a tool
    error naming the cap; no child is started for it."""
    fake_model.script(cid, three_research_calls(), text("two of three"))
    turn = await wait_turn(api, "dispatcher", cid, "go", status="completed")
    parts = [tool_part(turn, call) for call in ("call_a", "call_b", "call_c")]
    assert [p["state"] for p in parts] == ["output-available", "output-available", "output-error"]
    assert [p["output"]["text"] for p in parts[:2]] == ["echo: one", "echo: two"]
    error = parts[2]["errorText"]
    assert error.startswith("max_concurrent_agent_tools (2) exceeded: this is agent-tool call 3")
    assert await turns_of(api, "researcher", child_of(cid, "research.call_c")) == []
    assert len(await turns_of(api, "researcher", child_of(cid, "research.call_b"))) == 1
    # The model read the refusal as the call's result.
    assert "max_concurrent_agent_tools (2) exceeded" in tool_results(fake_model, cid, 1)["call_c"]

    # Durable: the decision is the stored message's, so a retried start decides the same.
    record = await service.store.get_turn(turn["turn_id"])
    assert record is not None
    agent = Dispatcher()
    tools = {t.name: t for t in agent.get_tools()}
    refused = [over_cap(agent, record, tools, c) for c in ("call_a", "call_b", "call_c")]
    assert refused[:2] == [None, None] and refused[2] == error


async def test_a_refused_call_runs_once_a_slot_is_free(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think: "allows the rejected slot to be reused once a run settles". The model calls the
    refused one again in its next step, when the others have answered: it runs."""
    fake_model.script(
        cid,
        three_research_calls(),
        tool_call("research", {"input": "three"}, id="call_again"),
        text("all three"),
    )
    turn = await wait_turn(api, "dispatcher", cid, "go", status="completed")
    assert tool_part(turn, "call_c")["state"] == "output-error"
    again = tool_part(turn, "call_again")
    assert again["state"] == "output-available" and again["output"]["text"] == "echo: three"


async def test_no_cap_on_agent_tools_by_default(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think: "allows unlimited concurrency by default (Infinity)". `Lead` sets no cap."""
    calls = [f"call_{n}" for n in range(4)]
    step = tool_call("research_fresh", {"input": "n0"}, id=calls[0])
    for n, call in enumerate(calls[1:], start=1):
        step = step + tool_call("research_fresh", {"input": f"n{n}"}, id=call)
    fake_model.script(cid, step, text("all four"))
    turn = await wait_turn(api, "lead", cid, "go", status="completed")
    assert [tool_part(turn, c)["output"]["text"] for c in calls] == [
        f"echo: n{n}" for n in range(4)
    ]


# -- a child's typed output ---------------------------------------------------------------


async def test_a_childs_typed_output_reaches_the_parent(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think: "returns structured output for a non-chat agent-tool run". A child whose turn
    has an output type (`Analyst`: `TurnConfig(output=Finding)`) gives its validated output to
    the parent's model as JSON, and to `run_agent_tool` as a `Finding`."""
    answer = {"topic": "tides", "confidence": 0.9}
    fake_model.script(cid, tool_call("analyse", {"input": "rate it"}, id="call_t"), text("rated"))
    fake_model.script(child_of(cid, "analyse.call_t"), text(json.dumps(answer)))
    turn = await wait_turn(api, "dispatcher", cid, "go", status="completed")
    output = tool_part(turn, "call_t")["output"]
    assert output["structured"] == answer and output["status"] == "completed"
    assert json.loads(tool_results(fake_model, cid, 1)["call_t"])["structured"] == answer

    # From code: the same child, and the pydantic model its turn named.
    fake_model.script(child_of(cid, "analyse"), text('{"topic": "waves", "confidence": 0.5}'))
    result = await service.conversation(Dispatcher, cid).run_agent_tool(
        Analyst, "and waves?", name="analyse"
    )
    assert result.error is None
    assert result.structured == Finding(topic="waves", confidence=0.5)
    assert result.output()["structured"] == {"topic": "waves", "confidence": 0.5}

    # A child without an output type answers as before: no `structured`.
    fake_model.script(cid, tool_call("research", {"input": "plain"}, id="call_p"), text("ok"))
    plain = await wait_turn(api, "dispatcher", cid, "again", status="completed")
    assert "structured" not in tool_part(plain, "call_p")["output"]


# -- a skipped child ----------------------------------------------------------------------


async def test_a_skipped_child_is_a_tool_error(
    service: ThinkService, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Think: "marks skipped agent-tool turns as errors". The child's turn waits behind
    another turn of its conversation and is superseded there (a "latest" submission) before it
    runs: the parent's model gets a tool error saying so, not an empty success."""
    child = child_of(cid, "research.call_s")
    fake_model.script(child, slow(), text("the newer one"))
    busy = await api.post(f"/v1/agents/researcher/conversations/{child}/turns", json={"input": "x"})
    assert busy.status_code == 202, busy.text
    await streaming(api, "researcher", child, busy.json()["turn_id"])
    fake_model.script(
        cid, tool_call("research", {"input": "dig"}, id="call_s"), text("it was skipped")
    )
    turns_url = f"/v1/agents/dispatcher/conversations/{cid}/turns"
    parent = await api.post(turns_url, json={"input": "go"})
    assert parent.status_code == 202, parent.text
    await queued_behind(api, child)
    newer = await api.post(
        f"/v1/agents/researcher/conversations/{child}/turns",
        json={"input": "newer", "concurrency": "latest"},
    )
    assert newer.status_code == 202, newer.text

    final = await until_status(api, parent.json()["status_url"], {"completed", "error"}, 60)
    assert final["status"] == "completed", final
    part = tool_part(final, "call_s")
    assert part["state"] == "output-error"
    turns = await turns_of(api, "researcher", child)
    delegated = next(t for t in turns if t["status"] == "skipped")
    assert part["errorText"] == (
        f"agent 'researcher' was skipped before it could answer: skipped: superseded by turn "
        f"{newer.json()['turn_id']} (message_concurrency 'latest') (turn {delegated['turn_id']} "
        f"in conversation {child})"
    )
    assert "was skipped before it could answer" in tool_results(fake_model, cid, 1)["call_s"]

    # `run_agent_tool` says so too: a skipped child's result has an error.
    fake_model.script(child_of(cid, "research"), slow(), text("newest"))
    conv = service.conversation("researcher", child_of(cid, "research"))
    ahead = await conv.submit_messages("busy")
    await streaming(api, "researcher", child_of(cid, "research"), ahead.turn_id)
    code = service.conversation(Dispatcher, cid)
    delegation = asyncio.create_task(code.run_agent_tool(Researcher, "dig", name="research"))
    await queued_behind(api, child_of(cid, "research"))
    await conv.submit_messages("newest", concurrency="latest")
    skipped = await asyncio.wait_for(delegation, 60)
    assert skipped.status == "skipped"
    assert skipped.error is not None
    assert skipped.error.startswith("agent 'researcher' was skipped before it could answer")


# -- agent tools that need approval --------------------------------------------------------


async def test_an_agent_tool_that_needs_approval_starts_its_child_once_approved(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, temporal: Client, cid: str
) -> None:
    """`agent_tool(..., needs_approval=True)`: the parent's turn pauses for a person, as for
    any tool, with no child started; approved over the usual HTTP route, the child runs and
    its answer is the call's result."""
    child = child_of(cid, "research_checked")
    fake_model.script(
        cid,
        tool_call("research_checked", {"input": "check it"}, id="call_ok"),
        text("checked"),
    )
    turn = await wait_turn(api, "dispatcher", cid, "go", status="awaiting_approval")
    [pending] = turn["pending_approvals"]
    assert (pending["tool_call_id"], pending["tool_name"]) == ("call_ok", "research_checked")
    assert pending["input"] == {"input": "check it"}
    assert tool_part(turn, "call_ok")["state"] == "approval-requested"
    assert await turns_of(api, "researcher", child) == []

    url = f"{turn['status_url']}/approvals/{pending['approval_id']}"
    decided = await api.post(url, json={"approved": True})
    assert decided.status_code == 200, decided.text
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    part = tool_part(final, "call_ok")
    assert part["state"] == "output-available"
    assert part["approval"] == {"id": pending["approval_id"], "approved": True}
    assert part["output"]["text"] == "echo: check it"
    assert [t["status"] for t in await turns_of(api, "researcher", child)] == ["completed"]

    # A replay history of the workflow change (tests/durability/test_replay.py replays it).
    handle = temporal.get_workflow_handle(turn_workflow_id("dispatcher", cid, turn["turn_id"]))
    await handle.result()
    history = await handle.fetch_history()
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert replayed.replay_failure is None
    path = HISTORIES / "agent-tool-approval-turn.json"
    if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
        path.write_text(history.to_json())


async def test_a_denied_agent_tool_starts_no_child(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Denied, the call starts no child and the model reads the denial and its reason."""
    child = child_of(cid, "research_checked")
    fake_model.script(
        cid,
        tool_call("research_checked", {"input": "check it"}, id="call_no"),
        text("understood"),
    )
    turn = await wait_turn(api, "dispatcher", cid, "go", status="awaiting_approval")
    approval_id = turn["pending_approvals"][0]["approval_id"]
    denied = await api.post(
        f"{turn['status_url']}/approvals/{approval_id}",
        json={"approved": False, "reason": "not now"},
    )
    assert denied.status_code == 200, denied.text
    final = await until_status(api, turn["status_url"], {"completed", "error"})
    assert final["status"] == "completed", final
    part = tool_part(final, "call_no")
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": approval_id, "approved": False, "reason": "not now"}
    assert tool_results(fake_model, cid, 1)["call_no"] == "The tool call was denied: not now"
    assert await turns_of(api, "researcher", child) == []
