"""Code mode (`Think.code_mode`): the model's `execute` program calls the agent's tools, each
call a durable step run once through the normal tool path, paused for approval like a model's
call, replayed from its record when the program runs again (here after a worker SIGKILL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from tests._ai_sdk import reconstruct
from tests._replay import replayed
from tests._sse import chunks, read_stream
from tests._stack import Stack
from tests._turn_helpers import sent, tool_part, until_status, wait_turn
from tests._waits import eventually
from tests.code_execution._effects import Effects
from tests.code_mode_agents import Coder, NoCode
from think import ThinkService
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import turn_workflow_id

PROGRAM = """
weather = await tools.lookup(city="Paris")
hot = await tools.convert(celsius=weather["celsius"])
report = await tools.send_report(text=f"Paris: {hot['fahrenheit']} F")
try:
    await tools.no_such_tool(x=1)
except ToolCallError as exc:
    unknown = str(exc)
try:
    await tools.convert(celsius="warm")
except ToolCallError as exc:
    bad_input = str(exc)
try:
    await tools.fail()
except ToolCallError as exc:
    failed = str(exc)
names = sorted(t["name"] for t in describe())
schema = [t for t in describe() if t["name"] == "lookup"][0]["input_schema"]
print("sent", report["sent"])
{
    "fahrenheit": hot["fahrenheit"],
    "sent": report["sent"],
    "unknown": unknown,
    "bad_input": bad_input,
    "failed": failed,
    "names": names,
    "lookup_takes": sorted(schema["properties"]),
}
"""


@pytest.fixture(scope="module")
def effects() -> Iterator[Effects]:
    with Effects() as running:
        yield running


async def test_a_program_calls_three_tools_one_approved_across_a_worker_crash_each_run_once(
    api: httpx.AsyncClient,
    stack: Stack,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    effects: Effects,
    cid: str,
) -> None:
    await service.conversation(Coder, cid).configure({"effects_url": effects.url})
    fake_model.script(cid, tool_call("execute", {"code": PROGRAM}, id="call_x"), text("done"))
    paused = await wait_turn(api, "coder", cid, "go", status="awaiting_approval")
    [pending] = paused["pending_approvals"]
    assert pending["tool_call_id"] == "call_x:2"
    assert (effects.runs["lookup"], effects.runs["convert"]) == (1, 1)
    assert effects.runs["send_report"] == 0
    # The worker dies while the program waits for a person; another takes over.
    stack.wait_polling(stack.replace_worker())
    url = f"{paused['status_url']}/approvals/{pending['approval_id']}"
    assert (await api.post(url, json={"approved": True})).status_code in (200, 202)
    turn = await until_status(api, paused["status_url"], {"completed", "error"}, 90)
    assert turn["status"] == "completed", turn
    # Every tool ran exactly once, though the program ran twice.
    assert dict(effects.runs) == {"lookup": 1, "convert": 1, "send_report": 1, "fail": 1}
    output = tool_part(turn, "call_x")["output"]
    result = output["result"]
    assert result["fahrenheit"] == 68
    assert result["sent"] == "Paris: 68.0 F"
    assert "no tool named 'no_such_tool'" in result["unknown"]
    assert "celsius" in result["bad_input"]
    assert "the fail tool failed" in result["failed"]
    assert result["names"] == ["convert", "fail", "lookup", "send_report", "stall"]
    assert result["lookup_takes"] == ["city"]
    assert output["stdout"] == "sent Paris: 68.0 F\n"
    # The inner calls are tool parts of their own, with their own ids.
    inner = {p["toolCallId"]: p for p in turn["message"]["parts"] if ":" in p.get("toolCallId", "")}
    assert [inner[f"call_x:{n}"]["type"] for n in range(3)] == [
        "tool-lookup",
        "tool-convert",
        "tool-send_report",
    ]
    assert inner["call_x:2"]["approval"]["approved"] is True
    assert inner["call_x:2"]["output"] == {"sent": "Paris: 68.0 F"}
    # The program's output is what the model reads in its next step; the inner calls are
    # the program's, not the model's, so they are not in its transcript.
    assert not [m for m in sent(fake_model, cid, 1) if ":" in str(m.get("tool_call_id", ""))]
    [answer] = [
        m for m in sent(fake_model, cid, 1) if m["role"] == "tool" and m["tool_call_id"] == "call_x"
    ]
    assert json.loads(answer["content"])["result"]["fahrenheit"] == 68
    # And the stream shows each inner call as a tool part, with its input and output.
    body, events = await read_stream(api, turn["stream_url"])
    # The AI SDK's own client builds the same message from it, inner calls and all.
    assert (await reconstruct(body))["message"] == turn["message"]
    seen = chunks(events)
    started = [c["toolCallId"] for c in seen if c["type"] == "tool-input-available"]
    ended = [c["toolCallId"] for c in seen if c["type"] == "tool-output-available"]
    assert started[:4] == ["call_x", "call_x:0", "call_x:1", "call_x:2"]
    assert {"call_x:0", "call_x:1", "call_x:2", "call_x"} <= set(ended)
    assert any(c["type"] == "tool-approval-request" and c["toolCallId"] == "call_x:2" for c in seen)


async def test_a_worker_killed_mid_program_reruns_it_and_no_settled_call_runs_again(
    api: httpx.AsyncClient,
    stack: Stack,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    effects: Effects,
    cid: str,
) -> None:
    await service.conversation(Coder, cid).configure({"effects_url": effects.url})
    before = dict(effects.runs)
    program = (
        'a = await tools.lookup(city="Rome")\n'
        "b = await tools.stall()\n"
        'c = await tools.convert(celsius=a["celsius"])\n'
        "[a['city'], b, c['fahrenheit']]"
    )
    fake_model.script(cid, tool_call("execute", {"code": program}, id="call_k"), text("ok"))
    submitted = await api.post(
        f"/v1/agents/coder/conversations/{cid}/turns", json={"input": "go", "mode": "submit"}
    )
    assert submitted.status_code == 202, submitted.text
    await eventually(lambda: _now(effects.runs["stall"] > before.get("stall", 0)))
    # The program waits in `stall`: the worker dies; the activity runs again elsewhere, and
    # the program with it, from the start.
    stack.wait_polling(stack.replace_worker())
    turn = await until_status(api, submitted.json()["status_url"], {"completed", "error"}, 90)
    assert turn["status"] == "completed", turn
    assert tool_part(turn, "call_k")["output"]["result"] == ["Rome", "went on", 68]
    ran = {name: effects.runs[name] - before.get(name, 0) for name in ("lookup", "convert")}
    assert ran == {"lookup": 1, "convert": 1}  # settled before the crash: answered from record
    assert effects.runs["stall"] - before.get("stall", 0) == 2  # cut off, so it ran again


async def _now(value: bool) -> bool:
    return value


async def test_a_denied_call_raises_in_the_program_which_goes_on(
    api: httpx.AsyncClient,
    service: ThinkService,
    fake_model: FakeOpenAIServer,
    effects: Effects,
    temporal: Client,
    cid: str,
) -> None:
    await service.conversation(Coder, cid).configure({"effects_url": effects.url})
    before = effects.runs["send_report"]
    program = (
        "try:\n    await tools.send_report(text='x')\n    said = 'sent'\n"
        "except ToolCallError as exc:\n    said = str(exc)\nsaid"
    )
    fake_model.script(cid, tool_call("execute", {"code": program}, id="call_d"), text("ok"))
    paused = await wait_turn(api, "coder", cid, "go", status="awaiting_approval")
    [pending] = paused["pending_approvals"]
    url = f"{paused['status_url']}/approvals/{pending['approval_id']}"
    body = {"approved": False, "reason": "not today"}
    assert (await api.post(url, json=body)).status_code in (200, 202)
    turn = await until_status(api, paused["status_url"], {"completed", "error"}, 60)
    assert turn["status"] == "completed", turn
    assert effects.runs["send_report"] == before
    said = tool_part(turn, "call_d")["output"]["result"]
    assert "denied" in said and "not today" in said
    # The shape of a turn whose program's call paused it (the tool activity run again with
    # the inner decision) replays against today's code (recorded with THINK_RECORD_HISTORIES=1).
    handle = temporal.get_workflow_handle(turn_workflow_id("coder", cid, turn["turn_id"]))
    await replayed(handle, "code-mode-inner-approval-turn")


async def test_a_program_that_fails_is_an_error_the_model_reads(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_model.script(cid, tool_call("execute", {"code": "1 / 0"}, id="call_z"), text("ok"))
    turn = await wait_turn(api, "coder", cid, "go", status="completed")
    part: dict[str, Any] = tool_part(turn, "call_z")
    assert part["state"] == "output-error"
    assert "ZeroDivisionError" in part["errorText"]


async def test_code_mode_is_off_by_default(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    assert Coder.code_mode is True and NoCode.code_mode is False
    fake_model.script(cid, text("hi"))
    await wait_turn(api, "nocode", cid, "hi", status="completed")
    offered = [t["function"]["name"] for t in fake_model.requests(cid)[0]["body"]["tools"]]
    assert "execute" not in offered
    assert "lookup" in offered
