"""Cross-tenant probes, generated from the gateway's route table: every operation of the OpenAPI
document is tried by another tenant with the first tenant's real ids, and by callers with
malformed keys. A route added tomorrow is probed without anyone listing it here.

What must hold: a malformed key is a 401 problem on every `/v1` operation; another tenant's
ids answer 404 (or, on an operation that creates, make the prober's own, separate resource);
no answer carries the first tenant's data; and the first tenant's conversation reads exactly
as before once every probe has run.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from api.app import create_app
from tests._stack import bearer_client
from think.server import Settings
from think.testing import FakeOpenAIServer, text, tool_call

DOCUMENT = create_app(Settings()).openapi()
SECRET = "alice-secret-7f3a"

MALFORMED_KEYS: list[bytes | None] = [
    None,
    b"Bearer",
    b"Bearer\talice-key",
    b"Bearer wrong-key",
    b"Bearer alice-ke",
    b"Bearer alice-keyx",
    b"Basic alice-key",
    b"alice-key",
    b"Bearer \xc3\xa9",
    "Bearer alice-key\u00a0".encode(),
    b"Bearer alice-key bob-key",
]

CREATES = {
    # A conversation id is a name within a tenant: the prober gets its own conversation.
    ("post", "/v1/agents/{agent}/conversations"),
    ("post", "/v1/agents/{agent}/conversations/{cid}/turns"),
    ("post", "/v1/agents/{agent}/conversations/{cid}/messages"),
}
SIGNED_BY_PLATFORM = {
    # A messenger's webhook is called by Telegram or Slack, which hold no key of ours: the
    # platform's signature is its check (tests/messengers/). Here it answers 404 (the probed
    # agent declares no messenger) before any key or body is looked at, and stores nothing.
    ("post", "/v1/messengers/{agent}/{messenger}/webhook"),
}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, ops in DOCUMENT["paths"].items()
        for method, operation in ops.items()
        if path.startswith("/v1/")
    ]


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def minimal(schema: dict[str, Any]) -> Any:
    """The smallest instance of `schema` worth sending: its required fields only, each the
    simplest value of its type. Not always valid (a pattern is not solved), which is fine: a
    probe must be refused whatever its body."""
    schema = _resolve(schema)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o).get("type") != "null"]
            return minimal(options[0]) if options else None
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if not properties:
            # A free-form object: in this API, a message part.
            return {"type": "text", "text": "probe"}
        return {name: minimal(properties.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [minimal(schema.get("items", {}))] * schema.get("minItems", 0)
    if kind == "string":
        return "probe"
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    return "probe"


def request_for(
    method: str, path: str, operation: dict[str, Any], ids: dict[str, str]
) -> dict[str, Any]:
    params = {p["name"]: p for p in operation.get("parameters", [])}
    url = path.format(**{n: ids.get(n, "probe") for n, p in params.items() if p["in"] == "path"})
    given = {**ids, "q": SECRET}  # a search for alice's words, as bob
    query = {n: given[n] for n, p in params.items() if p["in"] == "query" and n in given}
    body = None
    if "requestBody" in operation:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        body = minimal(schema)
        if path.endswith("/tool-results/{tool_call_id}"):
            body = {"output": "probe"}
    return {"method": method.upper(), "url": url, "params": query, "json": body}


async def _alices_conversation(api: httpx.AsyncClient, cid: str) -> dict[str, str]:
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    done = (await api.post(f"{base}/turns", json={"input": SECRET, "mode": "wait"})).json()
    assert done["status"] == "completed", done
    paused = (await api.post(f"{base}/turns", json={"input": "rm x", "mode": "wait"})).json()
    assert paused["status"] == "awaiting_approval", paused
    [approval] = paused["pending_approvals"]
    messages = (await api.get(f"{base}/messages")).json()["messages"]
    return {
        "agent": "gatekeeper",
        "cid": cid,
        "conversation_id": cid,
        "turn_id": paused["turn_id"],
        "approval_id": approval["approval_id"],
        "tool_call_id": approval["tool_call_id"],
        "message_id": messages[0]["id"],
        "leaf_id": messages[0]["id"],
    }


async def _snapshot(api: httpx.AsyncClient, cid: str) -> list[Any]:
    base = f"/v1/agents/gatekeeper/conversations/{cid}"
    return [(await api.get(base + tail)).json() for tail in ("", "/messages", "/turns")]


async def test_another_tenants_ids_are_not_found(
    tenants: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text(f"echo {SECRET}"), tool_call("delete_file", {"path": "x"}))
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        ids = await _alices_conversation(alice, cid)
        before = await _snapshot(alice, cid)
        answered = []
        # The creating ones last: once bob has his own conversation of that name, the others
        # would rightly find it.
        ordered = sorted(operations(), key=lambda op: (op[0], op[1]) in CREATES)
        for method, path, operation in ordered:
            probe = request_for(method, path, operation, ids)
            response = await bob.request(**probe)
            answered.append((method, path, response.status_code))
            assert response.status_code < 500, (method, path, response.text)
            assert SECRET not in response.text, (method, path, response.text)
            assert ids["turn_id"] not in response.text, (method, path, response.text)
            if "{cid}" in path and (method, path) not in CREATES:
                assert response.status_code == 404, (method, path, response.text)
                assert response.headers["content-type"] == "application/problem+json"
        # Every operation of the document was probed, the ones added later included.
        assert len(answered) == len(operations()) >= 18
        assert await _snapshot(alice, cid) == before
        # What bob made under the same name is bob's, and holds none of alice's.
        mine = (await bob.get(f"/v1/agents/gatekeeper/conversations/{cid}/messages")).json()
        assert SECRET not in str(mine)


@pytest.mark.parametrize("key", MALFORMED_KEYS, ids=lambda k: repr(k)[:24])
async def test_malformed_keys_are_refused_everywhere(
    tenants: str, key: bytes | None, cid: str
) -> None:
    headers = {"Authorization": key} if key is not None else {}
    ids = {"agent": "gatekeeper", "cid": cid, "turn_id": "turn_x", "conversation_id": cid}
    async with httpx.AsyncClient(base_url=tenants, headers=headers, timeout=30) as api:
        for method, path, operation in operations():
            response = await api.request(**request_for(method, path, operation, ids))
            if (method, path) in SIGNED_BY_PLATFORM:
                assert response.status_code == 404, (method, path, response.text)
                continue
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert response.headers["www-authenticate"] == "Bearer"
