"""What a hostile or careless client can make the gateway say: the OpenAPI document's promises,
the URLs it hands out, the tool-results body's exactly-one-of."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from api.app import create_app
from tests._stack import Stack
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
    assert expected <= set(responses), (method, path, sorted(responses))
    for code, response in responses.items():
        if code[0] in "45" and path != "/readyz":
            assert list(response["content"]) == ["application/problem+json"], (path, code)


def test_tool_results_schema_says_exactly_one_of() -> None:
    body = DOCUMENT["components"]["schemas"]["ToolResultBody"]
    validator = jsonschema.Draft202012Validator(body)
    assert validator.is_valid({"output": None})
    assert validator.is_valid({"output": {"a": 1}})
    assert validator.is_valid({"error": "boom"})
    assert not validator.is_valid({})
    assert not validator.is_valid({"output": 1, "error": "boom"})
    assert not validator.is_valid({"error": None})


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
    gateway = Stack(env=env, logs=tmp_path_factory.mktemp("public"))
    try:
        gateway.start_api()
        yield gateway.api_url
    finally:
        gateway.stop()


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
