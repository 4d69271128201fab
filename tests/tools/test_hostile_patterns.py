"""A pattern that never ends stalls no one (issue 31), through a real worker on real Postgres
and Temporal: while one conversation's `grep` runs `(a+)+$` and another's `find` runs
`**/**/**/**/x`, a third conversation's trivial turn on the same worker completes in normal
time, and the hostile calls end with a clear result.

Before RE2, both calls ran Python's backtracking `re` on the worker's event loop: the grep
held it for about 20 s and the find for about 9 s, and the trivial turn waited for them (the
issue measured 0.06 s becoming 45.6 s). The trivial turn is bounded by `wait_for`, so on that
code this test fails at 15 s rather than hanging."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from tests.agents import Helper, Workspaced
from think import ThinkService
from think.testing import FakeOpenAIServer, text, tool_call

DEEP = "a/" * 300 + "y"
"""A path 301 directories deep: `**/**/**/**/x` as a backtracking regex costs O(depth^4)."""


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


async def test_a_pattern_that_never_ends_stalls_no_one(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    hostile, deep, bystander = cid, f"{cid}-deep", f"{cid}-bystander"
    await (await service.conversation(Workspaced, hostile).workspace()).write(
        "a.txt", "a" * 28 + "!"
    )
    await (await service.conversation(Workspaced, deep).workspace()).write(DEEP, "deep")
    fake_model.script(
        hostile,
        tool_call("grep", {"pattern": "(a+)+$"}),
        tool_call("grep", {"pattern": r"(a)\1"}),
        tool_call("grep", {"pattern": "a" * 1001}),
        tool_call("grep", {"pattern": "a+!$"}),
        text("Searched."),
    )
    fake_model.script(
        deep,
        tool_call("find", {"pattern": "**/**/**/**/x"}),
        tool_call("find", {"pattern": "**/**/**/**/y"}),
        text("Found."),
    )
    fake_model.script(bystander, text("Hello."))

    started = time.monotonic()
    turns = [
        asyncio.create_task(service.conversation(Workspaced, hostile).run_turn("Search.")),
        asyncio.create_task(service.conversation(Workspaced, deep).run_turn("Find.")),
    ]
    try:
        # Both hostile calls are handed to the worker once the model has answered each first
        # step with its tool call; give the worker a moment to start them.
        while not (fake_model.requests(hostile) and fake_model.requests(deep)):
            assert time.monotonic() - started < 30, "the hostile turns never started"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)

        before = time.monotonic()
        quick = await asyncio.wait_for(
            service.conversation(Helper, bystander).run_turn("Hi."), timeout=15
        )
        took = time.monotonic() - before
        assert quick.status == "completed"
        assert took < 3, f"another conversation's trivial turn took {took:.1f} s"

        searched, found = await asyncio.wait_for(asyncio.gather(*turns), timeout=30)
    finally:
        for turn in turns:
            turn.cancel()
        await asyncio.wait(turns, timeout=10)
    assert searched.status == "completed" and found.status == "completed"
    assert time.monotonic() - started < 15

    grep = [tool_results(r)[-1] for r in fake_model.requests(hostile)[1:]]
    assert grep[0] == "No matches."
    assert grep[1].startswith("Error: the pattern '(a)\\\\1' cannot be run by grep's engine")
    assert "Backreferences" in grep[1] and "rewrite the pattern" in grep[1]
    assert grep[2] == (
        "Error: the pattern is 1001 characters long, over the 1000 allowed: search for a "
        "shorter, more specific pattern"
    )
    assert grep[3] == "a.txt:1: " + "a" * 28 + "!"
    find = [tool_results(r)[-1] for r in fake_model.requests(deep)[1:]]
    assert json.loads(find[0]) == []
    assert json.loads(find[1]) == [DEEP]
