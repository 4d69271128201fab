"""Server tools in a running turn: concurrency, hooks, validation the model corrects, policies."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests._stack import Stack
from tests._turn_helpers import tool_part, wait_turn
from think.testing import FakeOpenAIServer, text, tool_call


async def test_parallel_tools_run_concurrently(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("slow", {"seconds": 2}, id="call_1")
        + tool_call("slow", {"seconds": 2}, id="call_2"),
        text("Both done."),
    )
    started = time.monotonic()
    turn = await wait_turn(api, "helper", cid, "two slow things")
    elapsed = time.monotonic() - started
    assert turn["status"] == "completed"
    assert tool_part(turn, "call_1")["output"] == "done"
    assert tool_part(turn, "call_2")["output"] == "done"
    assert elapsed < 3.5, f"two 2-second tools took {elapsed:.1f} s: they did not overlap"


async def test_invalid_arguments_go_back_to_the_model_which_corrects_them(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("add", {"a": "three", "b": 4}, id="call_bad"),
        tool_call("add", {"a": 3, "b": 4}, id="call_good"),
        text("3 + 4 = 7"),
    )
    turn = await wait_turn(api, "helper", cid, "add three and four")
    assert turn["status"] == "completed"
    bad = tool_part(turn, "call_bad")
    assert bad["state"] == "output-error"
    assert "a: Input should be a valid integer" in bad["errorText"]
    assert "'three'" in bad["errorText"]
    # The model saw the error and its next call was valid.
    second = fake_model.requests(cid)[1]["body"]["messages"]
    [error] = [m for m in second if m["role"] == "tool"]
    assert error["tool_call_id"] == "call_bad" and "valid integer" in error["content"]
    assert tool_part(turn, "call_good")["output"] == 7


async def test_retry_policy_and_timeout(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("flaky", {"key": "k"}, id="call_flaky") + tool_call("sluggish", {}, id="call_sl"),
        text("ok"),
    )
    turn = await wait_turn(api, "gatekeeper", cid, "go")
    assert turn["status"] == "completed", turn
    assert tool_part(turn, "call_flaky")["output"] == "ok after 3 tries"
    slow = tool_part(turn, "call_sl")
    assert slow["state"] == "output-error"
    assert slow["errorText"] == "tool 'sluggish' did not finish within 0.5 s"


def hook_log(stack: Stack, cid: str) -> list[dict[str, Any]]:
    path = stack.logs / "tool-hooks.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["conversation_id"] == cid]


async def test_before_and_after_tool_call_hooks(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("explode", {"reason": "forbidden"}, id="call_block")
        + tool_call("get_weather", {"city": "Cache"}, id="call_sub")
        + tool_call("add", {"a": 1, "b": 2}, id="call_add")
        + tool_call("explode", {"reason": "real"}, id="call_fail"),
        text("Done."),
    )
    turn = await wait_turn(api, "hooked", cid, "hooks")
    assert turn["status"] == "completed", turn
    assert tool_part(turn, "call_block")["output"] == "explode is disabled here"
    assert tool_part(turn, "call_sub")["output"] == {"city": "Cache", "temp_c": -1, "cached": True}
    assert tool_part(turn, "call_add")["output"] == 1001  # the hook rewrote b
    assert tool_part(turn, "call_fail")["errorText"] == "RuntimeError: boom: real"

    outcomes = {(e["tool_name"], e["outcome"], e["success"]) for e in hook_log(stack, cid)}
    assert outcomes == {
        ("explode", "blocked", True),
        ("get_weather", "substituted", True),
        ("add", "executed", True),
        ("explode", "failed", False),
    }
    failed = next(e for e in hook_log(stack, cid) if e["outcome"] == "failed")
    assert failed["error"] == "RuntimeError: boom: real"
    assert failed["duration_ms"] >= 0
