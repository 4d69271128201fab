"""What a call of an MCP tool costs through this process's pool: the first connection (the
child started or the HTTP session opened, the tools listed), and then one call after another,
over stdio and over streamable HTTP on 127.0.0.1, against the test suite's real servers
(tests/mcp_notes_server.py, tests/mcp_calc_server.py).

    python -m bench.mcp_calls [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from think.dev._processes import free_port
from think.tools import McpServer
from think.tools._mcp_pool import close_pool, pool

ROOT = Path(__file__).resolve().parent.parent


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def measure(server: McpServer, tool: str, arguments: dict[str, object], calls: int) -> str:
    started = time.perf_counter()
    await pool().tools(server, wait=True)
    connect_ms = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await pool().call(server, tool, arguments)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p50, p95 = statistics.median(times), times[int(len(times) * 0.95) - 1]
    return f"| {server.transport} | {connect_ms:.0f} ms | {p50:.2f} ms | {p95:.2f} ms |"


async def measure_both(port: int, calls: int) -> None:
    notes = McpServer.stdio(
        "notes", command=sys.executable, args=[str(ROOT / "tests" / "mcp_notes_server.py")]
    )
    http = McpServer.http("calc", url=f"http://127.0.0.1:{port}/mcp")
    print("| transport | first connection | call p50 | call p95 |")
    print("| --- | --- | --- | --- |")
    try:
        print(await measure(notes, "pid", {}, calls))
        print(await measure(http, "add", {"a": 1, "b": 2}, calls))
    finally:
        await close_pool()


def main(calls: int) -> None:
    port = free_port("127.0.0.1")
    calc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp_calc_server.py"), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not _listening(port):
            time.sleep(0.05)
        asyncio.run(measure_both(port, calls))
    finally:
        calc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    main(parser.parse_args().calls)
