"""What a large workspace `write` costs the worker and the gateway in memory, and whether it
comes back (issue 31: one 14 MiB write took a worker from 310 to 607 MB, kept after).

python -m bench.workspace_memory [--mib 14] [--fragments 2000] [--small 20] [--repeat 3]

A real worker and gateway (subprocesses, `bench/_stack.py`) and the scripted model. The model
calls `write` with `--mib` MiB of text, streamed as `--fragments` argument deltas (a real model
streams a few tokens per delta; 2,000 keeps the fake server quick). The turn is followed over
SSE through the gateway, as a chat page would, and its messages are read back with
`GET …/messages`. RSS (`VmRSS` in /proc) of both processes is read after some small warm-up
turns (baseline), after each big turn, and after `--small` more small turns in other
conversations and a pause (settled). `--repeat` big turns run one after the other, each in
a conversation of its own, to tell a high-water mark from a leak. The per-file limit is
raised for the run, so the same script measures old and new code alike.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from pathlib import Path

import httpx

from bench._stack import local_stack
from think.testing import FakeOpenAIServer, text, tool_call

AGENT = "workspaced"


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid`, in MB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def turn(client: httpx.Client, cid: str) -> int:
    """Submit a turn in stream mode and read its stream to the end; the bytes streamed."""
    size = 0
    with client.stream(
        "POST",
        f"/v1/agents/{AGENT}/conversations/{cid}/turns",
        json={"input": "Write it.", "mode": "stream"},
    ) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
    return size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=14)
    parser.add_argument("--fragments", type=int, default=2000)
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="big turns, one after the other")
    args = parser.parse_args()
    big = int(args.mib * 1024 * 1024)
    env = {
        "THINK_WORKSPACE_MAX_FILE_BYTES": str(2 * big),
        "THINK_WORKSPACE_MAX_BYTES": str(4 * big),
        "THINK_TENANT_WORKSPACE_MAX_BYTES": "0",
    }
    with local_stack(agents="tests.agents:Workspaced", env=env) as (stack, model):
        assert isinstance(model, FakeOpenAIServer)
        stack.wait_polling(next(p for p in stack.processes if p.name == "worker"))
        pids = {name: found[0] for name, found in stack.pids.items() if name in ("worker", "api")}

        def sample(label: str) -> dict[str, float]:
            row = {}
            for name, pid in pids.items():
                rss, hwm = rss_mb(pid)
                row[f"{name}_rss"], row[f"{name}_peak"] = round(rss), round(hwm)
            print(f"{label:>10}: {json.dumps(row)}", flush=True)
            return row

        def small_turn(client: httpx.Client) -> None:
            cid = f"small-{secrets.token_hex(4)}"
            model.script(cid, tool_call("write", {"path": "a.txt", "content": "hi"}), text("ok"))
            turn(client, cid)

        with httpx.Client(base_url=stack.api_url, timeout=600) as client:
            for _ in range(5):
                small_turn(client)
            time.sleep(2)
            sample("baseline")
            line = "The quick brown fox jumps over the lazy dog, again and again. 0123456789\n"
            content = (line * (big // len(line) + 1))[:big]
            for n in range(1, args.repeat + 1):
                cid = f"big-{secrets.token_hex(4)}"
                model.script(
                    cid,
                    tool_call(
                        "write", {"path": "big.txt", "content": content}, fragments=args.fragments
                    ),
                    text("Written."),
                )
                started = time.perf_counter()
                streamed = turn(client, cid)
                took = time.perf_counter() - started
                messages = client.get(f"/v1/agents/{AGENT}/conversations/{cid}/messages")
                messages.raise_for_status()
                listing = client.get(f"/v1/agents/{AGENT}/conversations/{cid}/workspace").json()
                size = listing["files"][0]["size"] if listing["files"] else 0
                print(
                    f"content {len(content)} B; turn {took:.1f} s; streamed {streamed} B "
                    f"({streamed / len(content):.2f}x); GET messages {len(messages.content)} B "
                    f"({len(messages.content) / len(content):.2f}x); file {size} B",
                    flush=True,
                )
                del messages
                sample(f"after {n}")
            del content
            for _ in range(args.small):
                small_turn(client)
            time.sleep(5)
            sample("settled")


if __name__ == "__main__":
    main()
