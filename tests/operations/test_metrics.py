"""`/metrics` on the gateway and on a worker's own port, scraped while a real turn runs: the
counters move by exactly what the turn did, and no label holds a conversation id."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests._stack import Stack, extra_gateway, free_port
from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, error, text, tool_call

TURNS_ROUTE = "/v1/agents/{agent}/conversations/{cid}/turns"


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def measured(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A gateway and a worker of their own task queue, the worker serving metrics on a port,
    so what they count is this module's turns alone. Yields (gateway URL, worker metrics URL)."""
    port = free_port()
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": f"metrics-{secrets.token_hex(4)}",
        "THINK_WORKER_METRICS_PORT": str(port),
    }
    own = Stack(env=env, logs=tmp_path_factory.mktemp("metrics"))
    try:
        worker = own.start_worker()
        own.wait_polling(worker)
        own.start_api()
        yield own.api_url, f"http://127.0.0.1:{port}/metrics"
    finally:
        own.stop()


async def test_a_turn_moves_the_counters(
    measured: tuple[str, str], fake_model: FakeOpenAIServer, cid: str
) -> None:
    gateway, worker = measured
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
    before_worker, before_gateway = scrape(worker), scrape(f"{gateway}/metrics")

    async with httpx.AsyncClient(base_url=gateway, timeout=60) as api:
        turn = (
            await api.post(f"{helper_path(cid)}/turns", json={"input": "1+2?", "mode": "wait"})
        ).json()
        assert turn["status"] == "completed", turn
        # Reusing a key with another body is an admission conflict (409).
        headers = {"Idempotency-Key": f"k-{cid}"}
        await api.post(f"{helper_path(cid)}/turns", json={"input": "a"}, headers=headers)
        conflict = await api.post(f"{helper_path(cid)}/turns", json={"input": "b"}, headers=headers)
        assert conflict.status_code == 409

    after_worker, after_gateway = scrape(worker), scrape(f"{gateway}/metrics")

    def moved(before: dict, after: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
        return value(after, name, **labels) - value(before, name, **labels)

    w = (before_worker, after_worker)
    # The tool turn; the keyed one ("a") may not have ended yet.
    assert moved(*w, "think_turns_total", agent="helper", status="completed") >= 1
    assert moved(*w, "think_turn_duration_seconds_count", agent="helper", status="completed") >= 1
    assert moved(*w, "think_tool_calls_total", agent="helper", tool="add", outcome="success") == 1
    assert moved(*w, "think_tool_call_duration_seconds_count", agent="helper", tool="add") == 1
    assert moved(*w, "think_model_step_duration_seconds_count", agent="helper") >= 2
    assert moved(*w, "think_model_time_to_first_token_seconds_count", agent="helper") >= 2
    # The tool turn's tokens, by the model that answered and kind (the keyed turn's may follow).
    model = "openai:scripted-model"
    for kind in ("input", "output"):
        tokens = moved(*w, "think_model_tokens_total", agent="helper", model=model, kind=kind)
        assert tokens >= turn["usage"][f"{kind}_tokens"] > 0, kind
    # A model with no known price (the fake's, on no provider's URL) counts no dollars.
    assert turn["usage"]["cost"] is None
    assert moved(*w, "think_model_cost_total", agent="helper", model=model) == 0
    assert value(after_worker, "think_db_pool_connections", state="max") == 20
    # The gateway's turn was started by the worker, which began its first step beside the
    # start; the step went on from it, and nothing begun was given up.
    assert moved(*w, "think_early_first_steps_total", outcome="taken") >= 1
    assert moved(*w, "think_early_first_steps_total", outcome="dropped") == 0

    g = (before_gateway, after_gateway)
    route = {"method": "POST", "route": TURNS_ROUTE}
    assert moved(*g, "think_http_requests_total", **route, status="200") == 1
    assert moved(*g, "think_http_requests_total", **route, status="409") == 1
    assert moved(*g, "think_admission_conflicts_total", reason="idempotency") == 1
    assert value(after_gateway, "think_turns_active", status="awaiting_approval") >= 0
    assert ("think_turns_active", frozenset({("status", "awaiting_approval")})) in after_gateway
    assert value(after_gateway, "think_db_pool_connections", state="max") == 20
    # Bounded labels: no conversation or turn id anywhere.
    for _, labels in [*after_gateway, *after_worker]:
        assert all(cid not in v and "turn_" not in v for _, v in labels)


async def test_a_live_stream_is_counted(
    measured: tuple[str, str], fake_model: FakeOpenAIServer, cid: str
) -> None:
    """An open stream is counted while it is open (a turn paused for an approval keeps it
    open), and its live chunks' lag is observed."""
    gateway, _ = measured
    fake_model.script(cid, text("Deleting.") + tool_call("delete_file", {"path": "x"}))
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    before = scrape(f"{gateway}/metrics")
    async with (
        httpx.AsyncClient(base_url=gateway, timeout=60) as api,
        api.stream("POST", f"{base}/turns", json={"input": "rm x", "mode": "stream"}) as response,
    ):
        assert response.status_code == 200
        turn_id = response.headers["x-think-turn-id"]
        lines = response.aiter_lines()
        async for line in lines:
            if "tool-approval-request" in line:
                break
        during = scrape(f"{gateway}/metrics")
        await api.post(f"{base}/turns/{turn_id}/cancel", json={})
        rest = [line async for line in lines]
    assert rest[-1] == "data: [DONE]" or "data: [DONE]" in rest
    after = scrape(f"{gateway}/metrics")
    opened = value(before, "think_sse_streams_open")
    assert value(during, "think_sse_streams_open") == opened + 1
    assert value(after, "think_sse_streams_open") == opened
    lag = "think_stream_lag_seconds_count"
    assert value(after, lag) - value(before, lag) >= 2  # the text, the approval request, ...


async def test_model_failures_are_counted_by_what_went_wrong(
    measured: tuple[str, str], fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A failed model request is counted by kind: here a 503 (retried: `server`), then a 401
    (the key refused: `auth`, which ends the turn)."""
    gateway, worker = measured
    before = scrape(worker)
    fake_model.script(cid, error(503, "Overloaded"), text("fine"))
    async with httpx.AsyncClient(base_url=gateway, timeout=60) as api:
        url = f"{helper_path(cid)}/turns"
        turn = (await api.post(url, json={"input": "hi", "mode": "wait"})).json()
        assert turn["status"] == "completed", turn
        fake_model.script(cid, error(401, "Incorrect API key provided"))
        refused = (await api.post(url, json={"input": "again", "mode": "wait"})).json()
        assert refused["status"] == "error", refused
    after = scrape(worker)
    server = {"agent": "helper", "retryable": "true", "kind": "server"}
    auth = {"agent": "helper", "retryable": "false", "kind": "auth"}
    failures = "think_model_request_failures_total"
    assert value(after, failures, **server) - value(before, failures, **server) == 1
    assert value(after, failures, **auth) - value(before, failures, **auth) == 1


def test_the_gateways_pool_is_the_size_its_setting_says(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """THINK_DB_POOL_SIZE (issue 37: it was fixed at 20 in code), read back from the pool
    itself through the gateway's own metrics."""
    env = {**stack.env, "THINK_DB_POOL_SIZE": "3"}
    with extra_gateway(env, tmp_path_factory.mktemp("pool")) as url:
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'think_db_pool_connections{state="max"} 3.0' in metrics, [
        line for line in metrics.splitlines() if "pool" in line
    ]
