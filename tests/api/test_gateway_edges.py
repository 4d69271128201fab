"""What a hostile or careless client can make the gateway say: the OpenAPI document's promises,
the URLs it hands out, the tool-results body's exactly-one-of."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from api.app import create_app
from tests._stack import Stack, extra_gateway
from tests._turn_helpers import helper_path
from think.server import Settings
from think.testing import FakeOpenAIServer

DOCUMENT = create_app(Settings()).openapi()


def _operations() -> Iterator[tuple[str, str, dict[str, object]]]:
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            yield method, path, operation


@pytest.mark.parametrize(
    ("method", "path", "operation"), list(_operations()), ids=lambda v: str(v)[:60]
)
def test_every_operation_declares_the_machinerys_statuses(
    method: str, path: str, operation: dict[str, dict[str, dict[str, object]]]
) -> None:
    responses = operation["responses"]
    expected = set() if path == "/healthz" else {"503"}
    if path.startswith("/v1/"):
        expected |= {"401"}
    if "{" in path:
        expected |= {"404"}
    if "requestBody" in operation:
        expected |= {"400", "413", "422"}
    if (path.endswith(("/turns", "/regenerate")) and method == "post") or path.endswith("/stream"):
        expected |= {"429"}  # the per-tenant limits
    assert expected <= set(responses), (method, path, sorted(responses))
    for code, response in responses.items():
        if code[0] in "45" and path != "/readyz":
            assert list(response["content"]) == ["application/problem+json"], (path, code)


def test_tool_results_schema_says_exactly_one_of() -> None:
    # With the document's components, which `output` refers to (any storable JSON).
    schemas = DOCUMENT["components"]["schemas"]
    body = {**schemas["ToolResultBody"], "components": DOCUMENT["components"]}
    validator = jsonschema.Draft202012Validator(body)
    assert validator.is_valid({"output": None})
    assert validator.is_valid({"output": {"a": 1}})
    assert validator.is_valid({"error": "boom"})
    assert not validator.is_valid({})
    assert not validator.is_valid({"output": 1, "error": "boom"})
    assert not validator.is_valid({"error": None})
    assert not validator.is_valid({"output": "\x00"})
    assert not validator.is_valid({"error": "\x00"})


@pytest.mark.parametrize("body", [{}, {"output": 1, "error": "x"}, {"error": None}])
async def test_tool_results_refuse_what_the_schema_refuses(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, body: dict[str, object]
) -> None:
    turn = (
        await api.post(f"{helper_path(cid)}/turns", json={"input": "hi", "mode": "wait"})
    ).json()
    response = await api.post(f"{turn['status_url']}/tool-results/call_x", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] in ("output", "error")


async def test_urls_ignore_the_host_header(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A forged Host must not end up in the URLs handed out: without THINK_PUBLIC_URL they
    are paths."""
    response = await api.post(
        f"{helper_path(cid)}/turns",
        json={"input": "hi", "mode": "wait"},
        headers={"Host": "evil.example"},
    )
    turn = response.json()
    assert "evil" not in response.text
    assert turn["status_url"] == f"{helper_path(cid)}/turns/{turn['turn_id']}"
    assert turn["stream_url"] == f"{turn['status_url']}/stream"


@pytest.fixture(scope="module")
def public_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_PUBLIC_URL": "https://chat.example.com/"}
    with extra_gateway(env, tmp_path_factory.mktemp("public")) as url:
        yield url


async def test_urls_use_the_public_url(
    public_api: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    async with httpx.AsyncClient(base_url=public_api, timeout=30) as api:
        response = await api.post(
            f"{helper_path(cid)}/turns",
            json={"input": "hi", "mode": "wait"},
            headers={"Host": "evil.example", "X-Forwarded-Host": "evil.example"},
        )
    turn = response.json()
    assert "evil" not in response.text
    assert turn["status_url"] == (
        f"https://chat.example.com{helper_path(cid)}/turns/{turn['turn_id']}"
    )


@pytest.mark.parametrize("key", ["clé-1".encode(), b"k\xff", "k\u00a0".encode()])
async def test_a_non_ascii_idempotency_key_is_refused(
    api: httpx.AsyncClient, cid: str, key: bytes
) -> None:
    """Refused rather than stored as Starlette's Latin-1 reading of its bytes, which no other
    client would send back the same."""
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "hi"}, headers={"Idempotency-Key": key}
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"
    assert (await api.get(f"{helper_path(cid)}/turns")).status_code == 404  # nothing stored


# -- below the app: what the HTTP parser refuses, and slow clients -----------------------------


def _raw(url: str, request: bytes, *, wait: float = 30.0) -> bytes:
    """Send `request` as is on a new connection to the gateway (127.0.0.1) and read until the
    server closes it."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    assert host == "127.0.0.1"
    with socket.create_connection((host, port), timeout=wait) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _problem(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    assert headers["content-type"] == "application/problem+json", answer[:300]
    return status, json.loads(body)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n", 431),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400),
        (b"GARBAGE\r\n\r\n", 400),
    ],
    ids=["1MB-header", "NUL-in-header", "header-without-colon", "bad-request-line"],
)
def test_what_the_parser_refuses_is_a_problem(
    stack: Stack, request_bytes: bytes, status: int
) -> None:
    got, body = _problem(_raw(stack.api_url, request_bytes))
    assert got == status
    assert body["status"] == status
    assert str(body["detail"]).startswith("the request is not valid HTTP/1.1")


@pytest.fixture(scope="module")
def impatient_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_HEADER_TIMEOUT_SECONDS": "1"}
    with extra_gateway(env, tmp_path_factory.mktemp("impatient")) as url:
        yield url


def test_headers_sent_too_slowly_are_cut_off(impatient_api: str) -> None:
    """A slow-loris client (headers never finished) is answered 408 and closed by the server,
    instead of holding the connection as long as it likes."""
    got, body = _problem(_raw(impatient_api, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: "))
    assert got == 408
    assert "did not arrive within 1 s" in str(body["detail"])


def test_a_prompt_request_on_an_impatient_gateway_is_answered(impatient_api: str) -> None:
    answer = _raw(impatient_api, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ")
