"""THINK_API_KEYS: bearer keys per tenant; another tenant's conversations answer 404."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests._stack import Stack, extra_gateway
from think import ThinkService
from think._settings import Settings


@pytest.fixture(scope="module")
def keyed_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second gateway on the same services and task queue, with API keys configured."""
    env = {**stack.env, "THINK_API_KEYS": "alice-key:alice,bob-key:bob"}
    with extra_gateway(env, tmp_path_factory.mktemp("auth")) as url:
        yield url


def client(url: str, key: str | None) -> httpx.AsyncClient:
    # As UTF-8 bytes: a key a person pastes may carry a non-ASCII character.
    headers = {"Authorization": f"Bearer {key}".encode()} if key else {}
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=30)


@pytest.mark.parametrize(
    "key",
    [None, "wrong-key", "\u00e9", "alice-key\u00a0"],
    ids=["none", "wrong", "non-ascii", "key-and-nbsp"],
)
async def test_v1_needs_a_valid_key(keyed_api: str, key: str | None) -> None:
    async with client(keyed_api, key) as api:
        response = await api.get("/v1/agents")
        assert response.status_code == 401
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["www-authenticate"] == "Bearer"
        # Operations endpoints stay open for load balancers.
        assert (await api.get("/healthz")).status_code == 200


async def raw_get(url: str, authorization: bytes) -> tuple[int, bytes]:
    """GET /v1/agents with the header exactly as given, byte for byte: an HTTP client would
    refuse to send some of these bytes, a hostile one does not."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(
            b"GET /v1/agents HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
            b"Authorization: " + authorization + b"\r\n\r\n"
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1])
    return status, answer


@pytest.mark.parametrize(
    "trailer",
    [b"\xa0", b"\x85", b"\x1f", b"\x0b", b"\x0c", b"\x1c"],
    ids=["nbsp", "nel", "unit-separator", "vertical-tab", "form-feed", "file-separator"],
)
async def test_a_key_with_a_trailing_non_space_byte_is_refused(
    keyed_api: str, trailer: bytes
) -> None:
    """Python's `str.strip()` removes Unicode whitespace: `alice-key` followed by a byte that
    Latin-1 reads as whitespace was alice's key. Only ASCII spaces may surround the key."""
    status, answer = await raw_get(keyed_api, b"Bearer alice-key" + trailer)
    assert status in (400, 401), answer
    assert b"Traceback" not in answer
    if status == 401:
        head = answer.lower()
        assert b"application/problem+json" in head and b"www-authenticate: bearer" in head


async def test_spaces_around_the_key_are_not_part_of_it(keyed_api: str) -> None:
    status, answer = await raw_get(keyed_api, b"Bearer  alice-key  ")
    assert status == 200, answer


async def test_tenants_are_isolated(keyed_api: str, cid: str) -> None:
    async with client(keyed_api, "alice-key") as alice, client(keyed_api, "bob-key") as bob:
        turn = (
            await alice.post(
                f"/v1/agents/helper/conversations/{cid}/turns",
                json={"input": "secret", "mode": "wait"},
            )
        ).json()
        assert turn["status"] == "completed"
        base = f"/v1/agents/helper/conversations/{cid}"
        for path in ("", "/messages", "/turns", f"/turns/{turn['turn_id']}"):
            assert (await alice.get(base + path)).status_code == 200
            assert (await bob.get(base + path)).status_code == 404, path
        # Bob may use the same conversation id: it is a different conversation.
        mine = (await bob.post(f"{base}/turns", json={"input": "mine", "mode": "wait"})).json()
        assert mine["status"] == "completed"
        messages = (await bob.get(f"{base}/messages")).json()["messages"]
        assert [m["parts"][-1]["text"] for m in messages] == ["mine", "echo: mine"]


async def test_keys_turned_on_and_the_tenant_of_keyless_requests(
    stack: Stack, settings: Settings, tmp_path_factory: pytest.TempPathFactory, cid: str
) -> None:
    """Issue 37: turning THINK_API_KEYS on hid every earlier conversation; they belong to the
    tenant `default`, which a key can name (`k:default`). THINK_DEFAULT_TENANT names the
    tenant of keyless requests beforehand, so that the first key of that tenant sees them."""
    before, named = f"{cid}-before", f"{cid}-named"
    turn = {"input": "hi", "mode": "wait"}
    async with client(stack.api_url, None) as keyless:  # no keys: the tenant `default`
        answer = await keyless.post(f"/v1/agents/helper/conversations/{before}/turns", json=turn)
        assert answer.json()["status"] == "completed", answer.text
    acme_keyless = {**stack.env, "THINK_DEFAULT_TENANT": "acme"}
    with extra_gateway(acme_keyless, tmp_path_factory.mktemp("a")) as url:
        async with client(url, None) as keyless:
            answer = await keyless.post(f"/v1/agents/helper/conversations/{named}/turns", json=turn)
            assert answer.json()["status"] == "completed", answer.text
            # Another tenant's conversation: not there for this keyless gateway.
            assert (
                await keyless.get(f"/v1/agents/helper/conversations/{before}")
            ).status_code == 404
    keys = {**stack.env, "THINK_API_KEYS": "acme-key:acme,old-key:default,bare-key"}
    with extra_gateway(keys, tmp_path_factory.mktemp("b")) as url:
        async with client(url, "acme-key") as acme, client(url, "old-key") as old:
            assert (await acme.get(f"/v1/agents/helper/conversations/{named}")).status_code == 200
            assert (await acme.get(f"/v1/agents/helper/conversations/{before}")).status_code == 404
            # What was made before keys is the tenant `default`'s: a key of it sees it.
            assert (await old.get(f"/v1/agents/helper/conversations/{before}")).status_code == 200
            assert (await old.get(f"/v1/agents/helper/conversations/{named}")).status_code == 404
    # A script's conversations are those of keyless requests, unless it names a tenant.
    conf = settings.model_copy(update={"default_tenant": "acme"})
    async with await ThinkService.connect(conf) as service:
        conv = service.conversation("helper", named)
        assert conv.tenant == "acme" and len(await conv.messages()) == 2
        assert service.conversation("helper", named, tenant="default").tenant == "default"
    # A key given without a tenant is the default tenant's: here, acme's.
    with extra_gateway(
        {**keys, "THINK_DEFAULT_TENANT": "acme"}, tmp_path_factory.mktemp("c")
    ) as url:
        async with client(url, "bare-key") as bare:
            assert (await bare.get(f"/v1/agents/helper/conversations/{named}")).status_code == 200
