"""What delegating to a sub-agent costs, through HTTP (wait mode), the model scripted instant.

    python -m bench.sub_agents               # 50 turns of each shape
    python -m bench.sub_agents --turns 200

Three shapes, each p50/p95:
- the child's own turn: one model call, straight to `researcher`;
- a tool turn of the parent: model call, a plain tool (`slow(0)`), model call;
- a delegated turn: model call, the `research` agent tool (the child's whole turn, in its
  own workflow, waited for on a Signal), model call.
The delegation's own cost is the delegated turn less the tool turn and the child's turn.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench._stack import local_stack
from bench.turn_latency import pct, report
from think.testing import FakeOpenAIServer, text, tool_call


async def timed(api: httpx.AsyncClient, url: str) -> float:
    t0 = time.perf_counter()
    r = await api.post(url, json={"input": "go", "mode": "wait"})
    took = time.perf_counter() - t0
    assert r.json()["status"] == "completed", r.text
    return took


async def shapes(
    api: httpx.AsyncClient, model: FakeOpenAIServer, n: int, tag: str
) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"child": [], "tool": [], "delegated": []}
    for i in range(n):
        child = f"bench-{tag}-child-{i}"
        model.script(child, text("Found it."))
        url = f"/v1/agents/researcher/conversations/{child}/turns"
        found["child"].append(await timed(api, url))
        cid = f"bench-{tag}-tool-{i}"
        model.script(cid, tool_call("slow", {"seconds": 0}), text("Done."))
        found["tool"].append(await timed(api, f"/v1/agents/lead/conversations/{cid}/turns"))
        cid = f"bench-{tag}-delegated-{i}"
        model.script(cid, tool_call("research", {"input": "find it"}), text("Done."))
        model.script(f"lead.{cid}.research", text("Found it."))
        found["delegated"].append(await timed(api, f"/v1/agents/lead/conversations/{cid}/turns"))
    return found


async def run(args: argparse.Namespace) -> None:
    with local_stack(agents="tests.agents:Lead") as (stack, model):
        assert model is not None
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=60) as api:
            await shapes(api, model, 5, "warm")
            found = await shapes(api, model, args.turns, "run")
    report("child's own turn (1 model call)", found["child"])
    report("parent tool turn (2 calls, 1 tool)", found["tool"])
    report("delegated turn (2 calls + child)", found["delegated"])
    over_child = pct(found["delegated"], 0.5) - pct(found["child"], 0.5)
    wiring = over_child - pct(found["tool"], 0.5)
    print(f"delegated over the child's own turn, p50: {over_child:6.1f} ms")
    print(f"the delegation itself (less the tool turn), p50: {wiring:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=50)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
