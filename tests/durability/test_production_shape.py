"""The production shape under faults, as a whole: two gateways (either serves any stream),
three workers and a steady load of streamed turns, through a rolling restart of every worker
(SIGTERM), a worker SIGKILLed, a gateway SIGKILLed with streams open, Postgres restarted and
Temporal restarted, one after the other.

Each fault is tested alone elsewhere (test_crash_recovery.py, test_infra_restart.py,
tests/streaming/); this is the deployment a team runs, meeting them in one run. It runs on
services of its own (it stops them), and is the suite's slowest test (about two minutes).
`python -m bench.production` runs the same shape and reports its latencies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests._production import Deployment, Load, check, deployment, run_faults

pytestmark = pytest.mark.stack


@pytest.fixture
def shape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployment(tmp_path_factory.mktemp("production")) as running:
        yield running


@pytest.mark.timeout(300)
async def test_every_turn_ends_once_and_streams_whole_through_every_fault(
    shape: Deployment,
) -> None:
    try:
        async with Load(shape, clients=6) as load:
            async with shape.phase("steady"):
                await asyncio.sleep(3)
            found = await run_faults(shape, load)
            await load.drain()
        outcome = await check(shape, load.runs)
    except BaseException:
        print(shape.log_tails())  # pytest shows a failed test's output
        raise
    print("\n".join(shape.timeline))  # shown with `pytest -rP`
    print(outcome.summary(), found)

    assert not outcome.problems, "\n".join(outcome.problems[:20])
    assert outcome.statuses == {"completed": outcome.turns}
    # The load ran through every fault, and the faults did cut into it: the lost gateway had
    # streams open, which resumed on the other.
    assert outcome.turns >= 50, outcome.summary()
    assert found["streams_cut"] >= 2
    assert outcome.reconnects >= 1  # (a stream cut just as it ended needs none)
    assert outcome.model_calls >= outcome.turns
    assert len(shape.live("worker")) == 3 and len(shape.gateways) == 2
