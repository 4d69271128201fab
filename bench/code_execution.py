"""What a sandboxed run costs (issue 39): the sandbox's start cost (a program that does
nothing: `/bin/true`), a trivial Python program's round trip (`print(1)`), the same program
as a plain subprocess without the sandbox (the floor), one write-back sized run (a 1 MB file
in, a 1 MB file out), and a request over the host channel.

No stack: `think.sandbox.run` alone, which is all an `exec` call adds to a tool activity
(the workspace read and write-back are Postgres queries the workspace tools already pay).

    python -m bench.code_execution [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from think.sandbox import Limits, python_executable, run

LIMITS = Limits(wall_seconds=30)


def _summary(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(f"{name:<44} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms")


async def _timed(runs: int, once: Callable[[], Awaitable[Any]]) -> list[float]:
    await once()  # warm the page cache
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await once()
        out.append(time.perf_counter() - started)
    return out


async def main(runs: int) -> None:
    async def true() -> None:
        result = await run(argv=["/bin/true"], limits=LIMITS)
        assert result.ok

    async def trivial() -> None:
        result = await run("print(1)", limits=LIMITS)
        assert result.stdout == "1\n"

    async def plain() -> None:
        process = await asyncio.create_subprocess_exec(
            python_executable(), "-c", "print(1)", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        assert out == b"1\n"

    big = {"in.bin": b"x" * 1024 * 1024}

    async def files() -> None:
        result = await run("open('out.bin', 'wb').write(open('in.bin', 'rb').read())", files=big)
        assert len(result.files["out.bin"]) == 1024 * 1024

    async def echo(request: dict[str, Any]) -> dict[str, Any]:
        return request

    requests = 200
    channel_code = (
        "import think_host, time\n"
        "t = time.perf_counter()\n"
        f"for i in range({requests}):\n"
        "    think_host.request({'i': i})\n"
        "print(time.perf_counter() - t)\n"
    )
    per_request: list[float] = []

    async def channel() -> None:
        result = await run(channel_code, limits=LIMITS, on_request=echo)
        per_request.append(float(result.stdout) / requests)

    _summary("sandbox start cost (/bin/true)", await _timed(runs, true))
    _summary("trivial Python program, sandboxed", await _timed(runs, trivial))
    _summary("trivial Python program, plain subprocess", await _timed(runs, plain))
    _summary("1 MB in, 1 MB out, sandboxed", await _timed(runs, files))
    await _timed(max(3, runs // 5), channel)
    _summary("one request over the host channel", per_request)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
