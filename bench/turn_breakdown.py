"""Where a plain turn's time goes: admission, Temporal dispatch, the model step, the answer.

    python -m bench.turn_breakdown [--turns 40]

Sequential wait-mode turns of the instant scripted model; the legs come from the turn rows'
timestamps (`created_at`, `started_at`, `completed_at`) against the client's clock (one
machine), then the Temporal history of the last turn and of its conversation, event by event.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
import psycopg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench._stack import local_stack
from think.testing import text
from think.workflows.names import turn_workflow_id

_TIMES = """
    SELECT extract(epoch from created_at) AS created, extract(epoch from started_at) AS started,
           extract(epoch from completed_at) AS completed
    FROM turns WHERE id = %s
"""


async def run(turns: int) -> None:
    with local_stack() as (stack, model):
        assert model is not None
        url = stack.env["THINK_DATABASE_URL"].replace("postgresql+psycopg", "postgresql")
        client = await Client.connect(
            stack.env["TEMPORAL_ADDRESS"], data_converter=pydantic_data_converter
        )
        timed: list[tuple[str, str, float, float]] = []
        async with httpx.AsyncClient(base_url=stack.api_url, timeout=30) as api:
            for i in range(turns):
                cid = f"b{i}"
                model.script(cid, text("hello there"))
                sent = time.time()
                body = {"input": "hi", "mode": "wait"}
                turn = (
                    await api.post(f"/v1/agents/helper/conversations/{cid}/turns", json=body)
                ).json()
                timed.append((cid, turn["turn_id"], sent, time.time()))
        legs: dict[str, list[float]] = {
            "HTTP request -> turn row (admission)": [],
            "turn row -> first step (Temporal dispatch)": [],
            "first step -> stored answer": [],
            "stored answer -> HTTP response": [],
        }
        with psycopg.connect(url) as conn:
            for _, turn_id, sent, answered in timed[5:]:  # the first few warm up
                row = conn.execute(_TIMES, (turn_id,)).fetchone()
                assert row is not None
                created, started, completed = (float(v) for v in row)
                for leg, seconds in zip(
                    legs,
                    (created - sent, started - created, completed - started, answered - completed),
                    strict=True,
                ):
                    legs[leg].append(seconds * 1000)
        for leg, values in legs.items():
            print(f"{leg:44} p50 {statistics.median(values):7.1f} ms")
        cid, turn_id, _, _ = timed[-1]
        for workflow_id in (turn_workflow_id("helper", cid, turn_id),):
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            print(f"\n{workflow_id}")
            first = history.events[0].event_time.ToMicroseconds()
            for event in history.events:
                offset = (event.event_time.ToMicroseconds() - first) / 1000
                name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
                print(f"  {offset:8.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    asyncio.run(run(parser.parse_args().turns))


if __name__ == "__main__":
    main()
