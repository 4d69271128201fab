"""A whole local deployment for benchmarks: embedded services, one worker, one API, a model.

Benchmarks run by hand (`make bench`), never in CI: their figures go in docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests._stack import Stack, stack_env
from think._settings import Settings
from think.dev import start_services
from think.storage import migrate_now
from think.testing import FakeOpenAIServer


@contextlib.contextmanager
def local_stack(
    *,
    offline: bool = False,
    agents: str = "tests.agents:Helper,examples.assistant:Assistant",
    workers: int = 1,
    env: dict[str, str] | None = None,
    fairness: bool = True,
) -> Iterator[tuple[Stack, FakeOpenAIServer | None]]:
    with tempfile.TemporaryDirectory(prefix="think-bench-") as tmp:
        home = Path(tmp)
        # `fairness=False`: a Temporal without task-queue fairness (bench/fairness.py's baseline).
        with start_services(home, fairness=fairness) as services:
            migrate_now(services.settings(Settings()))
            # Keeping no requests: no benchmark reads them, and a long conversation's (4,000
            # messages each at turn 1,000) held in the measuring process cost its garbage
            # collector about 20 ms per request there, which the turn's latency then carried.
            model = None if offline else FakeOpenAIServer(keep=0).start()
            full_env = stack_env(
                database_url=services.database_url,
                temporal_address=services.temporal_address,
                task_queue="bench",
                agents=agents,
                model_url=model.base_url if model else None,
                home=home,
            )
            full_env["THINK_TEST_EVENTS_LOG"] = "0"  # tests/agents.py's event recorder: off
            full_env.update(env or {})
            stack = Stack(env=full_env, logs=home, services=services)
            try:
                for _ in range(workers):
                    stack.start_worker()
                stack.start_api()
                yield stack, model
            finally:
                stack.stop()
                if model:
                    model.stop()
