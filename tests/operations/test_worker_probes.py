"""A worker's probes beside its metrics (THINK_WORKER_METRICS_PORT), for orchestrators:
`/healthz` answers as soon as the process does, `/readyz` is 503 until Temporal lists the
worker among its task queue's pollers, 200 from then on, and 503 again from its SIGTERM while
it finishes what it runs.

The worker reaches the session's Temporal through a gate of the test's (tests/_tls.py's
proxy, plain TCP, holding connections until opened), so "before it polls" lasts exactly as
long as the test needs to look."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

import httpx

from tests._stack import Stack, free_port, own_stack
from tests._tls import tls_proxy
from tests._turn_helpers import helper_path, streaming, until_status
from tests._waits import eventually
from think.dev import Services
from think.testing import FakeOpenAIServer, reply, text


async def test_a_worker_is_ready_once_it_polls(
    stack: Stack, services: Services, tmp_path: Path
) -> None:
    port = free_port()
    with tls_proxy(services.temporal_address, None, gated=True) as gate:
        env = {
            **stack.env,
            "THINK_AGENTS": "tests.agents:Helper",
            "THINK_TASK_QUEUE": f"probes-{secrets.token_hex(4)}",
            "THINK_WORKER_METRICS_PORT": str(port),
            "TEMPORAL_ADDRESS": gate.address,
        }
        own = Stack(env=env, logs=tmp_path)
        try:
            worker = own.start_worker()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as probe:

                async def answers(path: str) -> httpx.Response | None:
                    try:
                        return await probe.get(path)
                    except httpx.TransportError:
                        return None

                live = await eventually(lambda: answers("/healthz"), within=60)
                assert (live.status_code, live.json()) == (200, {"status": "ok"})
                # Temporal is out of its reach: up, but not ready.
                waiting = await probe.get("/readyz")
                assert waiting.status_code == 503
                assert waiting.json() == {
                    "status": "unavailable",
                    "checks": {"polling": "starting"},
                }
                scraped = await probe.get("/metrics")
                assert scraped.status_code == 200 and "think_turns_total" in scraped.text
                gate.gate.set()

                async def ready() -> httpx.Response | None:
                    answer = await probe.get("/readyz")
                    return answer if answer.status_code == 200 else None

                polling = await eventually(ready, within=60)
                assert polling.json() == {"status": "ok", "checks": {"polling": "ok"}}
            own.wait_polling(worker)
            assert "worker ready: Temporal lists it polling" in worker.log.read_text()
        finally:
            own.stop()


async def test_a_worker_shutting_down_is_not_ready_while_it_finishes(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str, tmp_path: Path
) -> None:
    """SIGTERM mid-answer: `/readyz` says 503 at once, while the worker lets the step it
    runs finish its answer (the graceful shutdown), and the turn ends complete."""
    port = free_port()
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": f"probes-{secrets.token_hex(4)}",
        "THINK_WORKER_METRICS_PORT": str(port),
    }
    words = [f"w{i} " for i in range(40)]
    fake_model.script(cid, reply(text(*words), delay=0.1))  # about 4 s of answer
    with own_stack(env, tmp_path) as own:
        worker = next(p for p in own.processes if p.name == "worker")
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as probe,
            httpx.AsyncClient(base_url=own.api_url, timeout=60) as api,
        ):

            async def ready() -> httpx.Response | None:
                answer = await probe.get("/readyz")
                return answer if answer.status_code == 200 else None

            await eventually(ready, within=60)  # polling: Temporal lists it
            submitted = await api.post(f"{helper_path(cid)}/turns", json={"input": "go"})
            turn_id = submitted.json()["turn_id"]
            await streaming(api, "helper", cid, turn_id)
            worker.popen.send_signal(signal.SIGTERM)

            async def stopping() -> httpx.Response | None:
                answer = await probe.get("/readyz")
                return answer if answer.status_code == 503 else None

            refused = await eventually(stopping, within=10, every=0.05)
            assert refused.json() == {
                "status": "unavailable",
                "checks": {"polling": "shutting down"},
            }
            assert worker.popen.poll() is None  # still finishing the answer
            own.start_worker()  # the turn's last workflow task needs a worker
            turn = await until_status(
                api, f"{helper_path(cid)}/turns/{turn_id}", {"completed", "error"}, within=60
            )
        assert turn["status"] == "completed", turn
        assert turn["message"]["parts"][-1]["text"] == "".join(words)
        assert worker.popen.wait(30) == 0
