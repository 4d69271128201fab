"""What code mode's program costs (issue 39), without the stack: `think.codemode.run_program`
(the sandbox, the runtime, the channel) with a host that answers at once, for a program that
calls nothing and one that makes ten calls. The durable steps (each call recorded in the
turn's message) are Postgres writes a model's tool call pays too, and are not counted here.

    python -m bench.code_mode [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from think.codemode import CallAnswer, run_program

TOOLS = {"echo": {"description": "", "input_schema": {"type": "object"}}}


async def _echo(seq: int, name: str, arguments: Any) -> CallAnswer:
    return CallAnswer(output=arguments)


async def _timed(runs: int, code: str) -> list[float]:
    out = []
    for n in range(runs + 1):
        started = time.perf_counter()
        ran = await run_program(code, TOOLS, _echo, timeout_seconds=30, max_calls=50)
        assert ran.error is None, ran.error
        if n:  # the first warms the page cache
            out.append(time.perf_counter() - started)
    return out


def _summary(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(f"{name:<44} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms")


async def main(runs: int) -> None:
    none = await _timed(runs, "1 + 1")
    ten = await _timed(runs, "for i in range(10):\n    await tools.echo(i=i)\n")
    _summary("program, no calls (round trip)", none)
    _summary("program, 10 calls", ten)
    per_call = (statistics.median(ten) - statistics.median(none)) / 10
    print(f"{'one call over the channel (difference / 10)':<44} {per_call * 1000:7.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
