"""Per-tenant limits: submissions per minute (429 with Retry-After), open streams per tenant,
and CORS for the chat page's origin. Each on a gateway of its own, configured for it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests._stack import Stack, bearer_client, extra_gateway
from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, text, tool_call

KEYS = "alice-key:alice,bob-key:bob,carol-key:carol,dave-key:dave"


@pytest.fixture(scope="module")
def limited_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {
        **stack.env,
        "THINK_API_KEYS": KEYS,
        "THINK_SUBMISSIONS_PER_MINUTE": "1",
        "THINK_SUBMISSION_BURST": "2",
        "THINK_MAX_STREAMS_PER_TENANT": "1",
        "THINK_CORS_ORIGINS": "https://chat.example.com",
    }
    with extra_gateway(env, tmp_path_factory.mktemp("limits")) as url:
        yield url


async def test_submissions_over_the_rate_are_429(
    limited_api: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    async with (
        bearer_client(limited_api, "alice-key") as alice,
        bearer_client(limited_api, "bob-key") as bob,
    ):
        for _ in range(2):  # the burst
            ok = await alice.post(f"{helper_path(cid)}/turns", json={"input": "hi"})
            assert ok.status_code == 202, ok.text
        refused = await alice.post(f"{helper_path(cid)}/turns", json={"input": "one more"})
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "1 turns a minute" in refused.json()["detail"]
        turns = (await alice.get(f"{helper_path(cid)}/turns")).json()["turns"]
        assert len(turns) == 2  # the refused one admitted nothing
        # Another tenant has its own bucket.
        theirs = await bob.post(f"{helper_path(cid)}/turns", json={"input": "hi"})
        assert theirs.status_code == 202


async def test_open_streams_are_capped_per_tenant(
    limited_api: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """One open stream per tenant here: a second is 429 while the first is open (a turn paused
    for an approval keeps it open), and allowed again once the first has closed."""
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}, id="call_del"), text("ok"))
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    async with (
        bearer_client(limited_api, "carol-key") as carol,
        bearer_client(limited_api, "dave-key") as dave,
    ):
        paused = (await carol.post(f"{base}/turns", json={"input": "rm", "mode": "wait"})).json()
        assert paused["status"] == "awaiting_approval", paused
        stream_url = paused["stream_url"]
        async with carol.stream("GET", stream_url) as first:
            assert first.status_code == 200
            second = await carol.get(stream_url)
            assert second.status_code == 429
            assert second.headers["retry-after"] == "1"
            # Stream mode is refused before its turn is admitted.
            refused = await carol.post(f"{base}/turns", json={"input": "x", "mode": "stream"})
            assert refused.status_code == 429
            # Another tenant's streams are not counted against this one.
            theirs = await dave.post(
                f"{helper_path(cid)}/turns", json={"input": "x", "mode": "wait"}
            )
            assert theirs.status_code == 200
        turns = (await carol.get(f"{base}/turns")).json()["turns"]
        assert len(turns) == 1
        # The slot comes back when the first stream's response ends (the server notices
        # the client is gone a moment later).
        for _ in range(100):
            async with carol.stream("GET", stream_url) as again:
                if again.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        assert again.status_code == 200


async def test_cors_allows_the_configured_origin_only(limited_api: str) -> None:
    async with httpx.AsyncClient(base_url=limited_api, timeout=30) as api:
        preflight = {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        }
        allowed = await api.options(
            "/v1/agents", headers={**preflight, "Origin": "https://chat.example.com"}
        )
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://chat.example.com"
        assert "idempotency-key" in allowed.headers["access-control-allow-headers"].lower()
        other = await api.options(
            "/v1/agents", headers={**preflight, "Origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in other.headers
        # A real request from the page's origin can read even a 401.
        refused = await api.get("/v1/agents", headers={"Origin": "https://chat.example.com"})
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == "https://chat.example.com"
