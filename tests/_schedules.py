"""What the schedule tests share: a deployment of their own (task queue, worker, gateway),
polling, and reading the handlers' ledger."""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests._stack import ROOT, Stack
from think.schedules._names import agent_prefix


@dataclass
class Deployment:
    """A task queue with its own worker(s) (and gateway), so its schedules, reconciles and
    outages are its own."""

    stack: Stack
    queue: str
    ledger: Path

    def runs(self, task: str) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        entries = [json.loads(line) for line in self.ledger.read_text().splitlines()]
        return [e for e in entries if e["task_id"] == task]


def deployment(base: Stack, tmp: Path, agents: str, **env: str) -> Deployment:
    queue = f"sched-{secrets.token_hex(4)}"
    ledger = tmp / f"{queue}.jsonl"
    stack = Stack(
        env={
            **base.env,
            "THINK_TASK_QUEUE": queue,
            "THINK_AGENTS": agents,
            "THINK_TEST_LEDGER": str(ledger),
            **env,
        },
        logs=tmp,
    )
    return Deployment(stack, queue, ledger)


async def run(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """A command's exit status, stdout and stderr, without blocking the event loop."""
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def schedule_ids(client: Client, queue: str, agent: str) -> set[str]:
    prefix = agent_prefix(queue, agent)
    return {s.id async for s in await client.list_schedules() if s.id.startswith(prefix)}


async def delete_schedules(client: Client, queue: str, agent: str) -> None:
    for schedule_id in await schedule_ids(client, queue, agent):
        await client.get_schedule_handle(schedule_id).delete()
