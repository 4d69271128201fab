"""Limits that hold across the gateways of a deployment (issue 37): two gateway processes on
the same Postgres give a tenant its submissions and its streams once, not once each; and a
deployment without API keys that sets no limit has none."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests._stack import Stack, bearer_client, extra_gateway
from tests._turn_helpers import helper_path
from think._settings import Settings
from think.testing import FakeOpenAIServer, text, tool_call

# Tenants of this module alone: the buckets and leases live in the suite's shared Postgres.
RUN = secrets.token_hex(4)
ERIN, FRANK = f"erin-{RUN}", f"frank-{RUN}"
KEYS = f"erin-key:{ERIN},frank-key:{FRANK}"


@pytest.fixture(scope="module")
def two_gateways(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    env = {
        **stack.env,
        "THINK_API_KEYS": KEYS,
        "THINK_SUBMISSIONS_PER_MINUTE": "1",
        "THINK_SUBMISSION_BURST": "3",
        "THINK_MAX_STREAMS_PER_TENANT": "1",
    }
    with (
        extra_gateway(env, tmp_path_factory.mktemp("gateway-a")) as a,
        extra_gateway(env, tmp_path_factory.mktemp("gateway-b")) as b,
    ):
        yield [a, b]


@pytest.fixture(scope="module")
def unlimited_gateway(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway as a fresh deployment runs it: no API keys, no limit set."""
    env = {k: v for k, v in stack.env.items() if k != "THINK_SUBMISSIONS_PER_MINUTE"}
    with extra_gateway(env, tmp_path_factory.mktemp("unlimited")) as url:
        yield url


async def test_a_tenant_gets_its_burst_once_across_two_gateways(
    two_gateways: list[str], fake_model: FakeOpenAIServer, cid: str
) -> None:
    a, b = two_gateways
    async with (
        bearer_client(a, "erin-key") as on_a,
        bearer_client(b, "erin-key") as on_b,
        bearer_client(b, "frank-key") as frank,
    ):
        answers = []
        for i in range(6):  # alternately: each gateway alone would allow its own 3
            client = on_a if i % 2 == 0 else on_b
            answers.append(await client.post(f"{helper_path(cid)}/turns", json={"input": "hi"}))
        assert [r.status_code for r in answers] == [202, 202, 202, 429, 429, 429]
        assert 1 <= int(answers[-1].headers["retry-after"]) <= 60
        turns = (await on_a.get(f"{helper_path(cid)}/turns")).json()["turns"]
        assert len(turns) == 3  # the refused ones admitted nothing
        # Another tenant's bucket is its own.
        theirs = await frank.post(f"{helper_path(cid)}/turns", json={"input": "hi"})
        assert theirs.status_code == 202


async def test_a_tenant_gets_its_streams_once_across_two_gateways(
    two_gateways: list[str], fake_model: FakeOpenAIServer, cid: str
) -> None:
    """One open stream for the tenant: held on one gateway, the other refuses a second one;
    once the first closes, the other serves it."""
    a, b = two_gateways
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}, id="call_del"), text("ok"))
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    async with bearer_client(a, "frank-key") as on_a, bearer_client(b, "frank-key") as on_b:
        paused = (await on_a.post(f"{base}/turns", json={"input": "rm", "mode": "wait"})).json()
        assert paused["status"] == "awaiting_approval", paused
        stream_url = paused["stream_url"]
        async with on_a.stream("GET", stream_url) as first:
            assert first.status_code == 200
            second = await on_b.get(stream_url)
            assert second.status_code == 429
            assert "too many open streams" in second.json()["detail"]
        again = await _until_served(on_b, stream_url)
        assert again == 200


async def _until_served(client: httpx.AsyncClient, url: str) -> int:
    """The status of a stream request, asked again while the first one's slot is still held
    (its gateway notices the client has gone a moment later)."""
    status = 0
    for _ in range(100):
        async with client.stream("GET", url) as response:
            status = response.status_code
        if status == 200:
            break
        await asyncio.sleep(0.1)
    return status


async def test_no_limit_by_default_without_api_keys(
    unlimited_gateway: str, fake_model: FakeOpenAIServer
) -> None:
    """Past the old default's burst (60) at once: every submission is accepted."""
    async with httpx.AsyncClient(base_url=unlimited_gateway, timeout=60) as api:
        answers = await asyncio.gather(
            *(
                api.post(f"{helper_path(f'c-{secrets.token_hex(6)}')}/turns", json={"input": "hi"})
                for _ in range(70)
            )
        )
    assert {r.status_code for r in answers} == {202}


def test_the_default_limit_is_off_without_keys_and_on_with_them() -> None:
    assert Settings().submission_rate == 0
    assert Settings(api_keys={"k": "acme"}).submission_rate == 600
    assert Settings(submissions_per_minute=0, api_keys={"k": "acme"}).submission_rate == 0
    assert Settings(submissions_per_minute=30).submission_rate == 30
