"""Bad input to every endpoint: a problem document that names the field, never a 500 or a
traceback, and nothing written for a rejected submission (API.md, "Errors")."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._turn_helpers import helper_path, stored_rows
from think.testing import FakeOpenAIServer

PROBLEM = "application/problem+json"
JSON = {"content-type": "application/json"}
LIMIT = 16 * 1024 * 1024  # Settings.max_body_bytes by default (API.md: 16 MiB)
TITLES = {
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    422: "Unprocessable Content",
}
MESSAGE = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}


def assert_problem(
    response: httpx.Response, status: int, field: str | None = None
) -> dict[str, Any]:
    """The response is an RFC 9457 problem of `status` that names `field`, if given."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert "Traceback" not in response.text and 'File "' not in response.text
    body: dict[str, Any] = response.json()
    assert isinstance(body["type"], str) and body["type"]
    assert body["title"] == TITLES[status]
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    if field is not None:
        fields = [e["field"] for e in body.get("errors", [])]
        named = field in body["detail"] or any(
            f == field or f.startswith(f"{field}.") for f in fields
        )
        assert named, f"{field!r} not named in {body}"
    return body


NOTHING = (0, 0, 0)


async def finished_turn(api: httpx.AsyncClient, cid: str) -> dict[str, Any]:
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "hello", "mode": "wait", "wait_timeout": 30}
    )
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    return turn


@pytest.fixture(scope="module")
async def done(api: httpx.AsyncClient) -> dict[str, Any]:
    """A conversation with one completed turn (its user and assistant messages stored)."""
    return await finished_turn(api, f"c-done-{secrets.token_hex(6)}")


@pytest.fixture(scope="module")
async def other(api: httpx.AsyncClient) -> dict[str, Any]:
    """Another conversation of the same agent with one completed turn."""
    return await finished_turn(api, f"c-other-{secrets.token_hex(6)}")


# -- POST .../turns: the body -----------------------------------------------------------------


def raw(content: bytes, content_type: str | None = "application/json") -> dict[str, Any]:
    return {"content": content, "headers": {"content-type": content_type} if content_type else {}}


def body(value: Any) -> dict[str, Any]:
    return {"json": value}


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


BAD_SUBMISSIONS = [
    # Not JSON at all, or not JSON as declared: 400, whatever it is instead (API.md).
    pytest.param(raw(b'{"input": "hi"'), 400, None, id="truncated-json"),
    pytest.param(raw(b'{"input": "hi"} trailing'), 400, None, id="trailing-garbage"),
    pytest.param(raw(b"{'input': 'hi'}"), 400, None, id="single-quotes"),
    pytest.param(raw(b'{"input": "\xff\xfe"}'), 400, None, id="not-utf8"),
    pytest.param(raw(b'{"input": "hi"}', "text/plain"), 400, None, id="text-plain"),
    pytest.param(raw(b'{"input": "hi"}', "application/xml"), 400, None, id="xml"),
    pytest.param(raw(b"input=hi", "application/x-www-form-urlencoded"), 400, None, id="form"),
    pytest.param(raw(b'{"input": "hi"}', None), 400, None, id="no-content-type"),
    pytest.param(raw(b"hello", "text/plain"), 400, None, id="plain-text"),
    pytest.param(raw(b"\x89PNG\r\n\x1a\n", "image/png"), 400, None, id="png"),
    pytest.param(raw(b"hello"), 400, None, id="text-declared-json"),
    pytest.param(raw(b""), 422, None, id="empty-body"),
    pytest.param(raw(b"null"), 422, None, id="json-null"),
    pytest.param(body([{"input": "hi"}]), 422, None, id="json-array"),
    pytest.param(body("hi"), 422, None, id="json-string"),
    # input
    pytest.param(body({}), 422, "input", id="missing-input"),
    pytest.param(body({"mode": "wait"}), 422, "input", id="only-mode"),
    pytest.param(body({"input": None}), 422, "input", id="input-null"),
    pytest.param(body({"input": 5}), 422, "input", id="input-int"),
    pytest.param(body({"input": True}), 422, "input", id="input-bool"),
    pytest.param(body({"input": ["hi"]}), 422, "input", id="input-list-of-str"),
    pytest.param(body({"input": ""}), 422, "input", id="input-empty-string"),
    pytest.param(body({"input": "  \n\t"}), 422, "input", id="input-whitespace"),
    pytest.param(body({"input": []}), 422, "input", id="input-empty-list"),
    pytest.param(body({"input": {**MESSAGE, "role": "robot"}}), 422, "input", id="bad-role"),
    pytest.param(body({"input": {**MESSAGE, "role": None}}), 422, "input", id="null-role"),
    pytest.param(body({"input": {"parts": MESSAGE["parts"]}}), 422, "input", id="no-role"),
    pytest.param(body({"input": {"role": "user"}}), 422, "input", id="no-parts"),
    pytest.param(body({"input": {"role": "user", "parts": []}}), 422, "input", id="empty-parts"),
    pytest.param(
        body({"input": {"role": "user", "parts": [{"text": "hi"}]}}),
        422,
        "input",
        id="part-no-type",
    ),
    pytest.param(
        body({"input": {"role": "user", "parts": [{"type": "", "text": "hi"}]}}),
        422,
        "input",
        id="part-empty-type",
    ),
    pytest.param(
        body({"input": {"role": "user", "parts": [{"type": 3}]}}), 422, "input", id="part-int-type"
    ),
    pytest.param(
        body({"input": {"role": "user", "parts": [{"type": "text"}]}}),
        422,
        "input",
        id="text-part-no-text",
    ),
    pytest.param(body({"input": {"role": "user", "parts": ["hi"]}}), 422, "input", id="part-str"),
    pytest.param(body({"input": {"role": "user", "parts": "hi"}}), 422, "input", id="parts-str"),
    pytest.param(body({"input": {**MESSAGE, "color": "red"}}), 422, "input", id="message-extra"),
    pytest.param(body({"input": {**MESSAGE, "id": ""}}), 422, "input", id="message-empty-id"),
    pytest.param(body({"input": {**MESSAGE, "id": "m" * 201}}), 422, "input", id="message-long-id"),
    pytest.param(body({"input": {**MESSAGE, "metadata": []}}), 422, "input", id="metadata-list"),
    pytest.param(body({"input": [MESSAGE, {"role": "user"}]}), 422, "input", id="second-bad"),
    # Text that Postgres cannot store must be refused up front, not fail in an INSERT.
    pytest.param(body({"input": "a\u0000b"}), 422, "input", id="input-nul"),
    pytest.param(raw(b'{"input": "a\\ud800b"}'), 422, "input", id="input-lone-surrogate"),
    pytest.param(body({"input": {**MESSAGE, "id": "m\u0000"}}), 422, "input", id="message-id-nul"),
    pytest.param(body({"input": "hi", "body": {"k\u0000": 1}}), 422, "body", id="body-key-nul"),
    pytest.param(raw(b'{"input": "hi", "body": {"x": NaN}}'), 422, "body", id="body-nan"),
    pytest.param(raw(b'{"input": "hi", "body": {"x": -Infinity}}'), 422, "body", id="body-inf"),
    pytest.param(
        raw(b'{"input": {"role": "user", "parts": [{"type": "data-x", "data": NaN}]}}'),
        422,
        "input",
        id="part-nan",
    ),
    # Nesting that pydantic could not serialize (a 500 once) or json could not even parse.
    pytest.param(body({"input": "hi", "body": {"x": nested(150)}}), 422, "body", id="body-deep"),
    pytest.param(
        body({"input": {**MESSAGE, "metadata": {"x": nested(300)}}}), 422, "input", id="input-deep"
    ),
    pytest.param(
        raw(b'{"input": "hi", "body": %s}' % (b"[" * 5000 + b"]" * 5000)),
        400,
        None,
        id="too-deep-to-parse",
    ),
    # mode and wait_timeout
    pytest.param(body({"input": "hi", "mode": "fast"}), 422, "mode", id="unknown-mode"),
    pytest.param(body({"input": "hi", "mode": "WAIT"}), 422, "mode", id="mode-case"),
    pytest.param(body({"input": "hi", "mode": 1}), 422, "mode", id="mode-int"),
    pytest.param(body({"input": "hi", "mode": None}), 422, "mode", id="mode-null"),
    pytest.param(body({"input": "hi", "wait_timeout": -1}), 422, "wait_timeout", id="timeout-neg"),
    pytest.param(body({"input": "hi", "wait_timeout": 0}), 422, "wait_timeout", id="timeout-zero"),
    pytest.param(
        body({"input": "hi", "wait_timeout": 1e9}), 422, "wait_timeout", id="timeout-huge"
    ),
    pytest.param(
        raw(b'{"input": "hi", "wait_timeout": Infinity}'), 422, "wait_timeout", id="timeout-inf"
    ),
    pytest.param(
        raw(b'{"input": "hi", "wait_timeout": NaN}'), 422, "wait_timeout", id="timeout-nan"
    ),
    pytest.param(
        body({"input": "hi", "wait_timeout": "soon"}), 422, "wait_timeout", id="timeout-str"
    ),
    # a coercion would change the meaning: a string or a boolean is not a number of seconds
    pytest.param(
        body({"input": "hi", "wait_timeout": "5"}), 422, "wait_timeout", id="timeout-numeric-str"
    ),
    pytest.param(
        body({"input": "hi", "wait_timeout": True}), 422, "wait_timeout", id="timeout-bool"
    ),
    # other fields
    pytest.param(body({"input": "hi", "inputs": "x"}), 422, "inputs", id="unknown-field"),
    pytest.param(body({"input": "hi", "parent_id": ""}), 422, "parent_id", id="parent-empty"),
    pytest.param(body({"input": "hi", "parent_id": 5}), 422, "parent_id", id="parent-int"),
    pytest.param(body({"input": "hi", "parent_id": "m\u0000"}), 422, "parent_id", id="parent-nul"),
    pytest.param(body({"input": "hi", "body": []}), 422, "body", id="body-list"),
    pytest.param(body({"input": "hi", "body": "x"}), 422, "body", id="body-str"),
    pytest.param(body({"input": "hi", "client_tools": {}}), 422, "client_tools", id="tools-obj"),
    pytest.param(
        body({"input": "hi", "client_tools": [{"name": "bad name"}]}),
        422,
        "client_tools",
        id="tool-bad-name",
    ),
    pytest.param(
        body({"input": "hi", "client_tools": [{"description": "x"}]}),
        422,
        "client_tools",
        id="tool-no-name",
    ),
    pytest.param(
        body({"input": "hi", "client_tools": [{"name": "t", "extra": 1}]}),
        422,
        "client_tools",
        id="tool-extra",
    ),
    pytest.param(
        body({"input": "hi", "client_tools": [{"name": "t", "input_schema": []}]}),
        422,
        "client_tools",
        id="tool-schema-list",
    ),
]


@pytest.mark.parametrize(("request_kw", "status", "field"), BAD_SUBMISSIONS)
async def test_bad_submission_writes_nothing(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    cid: str,
    request_kw: dict[str, Any],
    status: int,
    field: str | None,
) -> None:
    response = await api.post(f"{helper_path(cid)}/turns", **request_kw)
    assert_problem(response, status, field)
    # A rejected first submission does not even create the conversation.
    assert await stored_rows(engine, cid) == NOTHING


async def test_wrong_content_type_names_json(api: httpx.AsyncClient, cid: str) -> None:
    response = await api.post(
        f"{helper_path(cid)}/turns",
        content=b'{"input": "hi"}',
        headers={"content-type": "text/plain"},
    )
    detail = assert_problem(response, 400)["detail"]
    assert "not JSON" in detail and "'text/plain'" in detail and "application/json" in detail
    response = await api.post(f"{helper_path(cid)}/turns", **raw(b'{"input": "hi"}', None))
    assert "no Content-Type" in assert_problem(response, 400)["detail"]


async def test_truncated_json_says_so(api: httpx.AsyncClient, cid: str) -> None:
    response = await api.post(f"{helper_path(cid)}/turns", **raw(b'{"input": "x"'))
    detail = assert_problem(response, 400)["detail"]
    assert "not valid JSON" in detail and "at character 13" in detail  # where it ends


@pytest.mark.parametrize(
    ("path", "content"),
    [
        pytest.param("/turns/turn_0000000000000000/cancel", b"{", id="cancel"),
        pytest.param("/turns/turn_0000000000000000/approvals/approval_x", b"{", id="approval"),
        pytest.param("/messages", b'{"messages": [', id="messages"),
    ],
)
async def test_other_bodies_that_are_not_json(
    api: httpx.AsyncClient, done: dict[str, Any], path: str, content: bytes
) -> None:
    """Every route with a body: malformed JSON and a body that is not JSON both answer 400."""
    url = helper_path(done["conversation_id"]) + path
    assert "not valid JSON" in assert_problem(await api.post(url, **raw(content)), 400)["detail"]
    response = await api.post(url, **raw(b"yes", "text/plain"))
    assert "not JSON" in assert_problem(response, 400)["detail"]


async def test_malformed_json_says_where(api: httpx.AsyncClient, cid: str) -> None:
    response = await api.post(f"{helper_path(cid)}/turns", **raw(b'{"input": }'))
    detail = assert_problem(response, 400)["detail"]
    assert "not valid JSON" in detail and "Expecting value" in detail and "10" in detail


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param(5, "input", id="int"),
        pytest.param({**MESSAGE, "role": "robot"}, "input.message.role", id="role"),
        pytest.param({"role": "user"}, "input.message.parts", id="no-parts"),
        pytest.param({"role": "user", "parts": [{}]}, "input.message.parts", id="part-no-type"),
        pytest.param({**MESSAGE, "color": "red"}, "input.message.color", id="extra"),
        pytest.param([MESSAGE, {"role": "user"}], "input.messages.1.parts", id="second"),
        pytest.param([MESSAGE, "hi"], "input.messages.1", id="str-in-list"),
    ],
)
async def test_bad_input_is_reported_once_where_it_is_wrong(
    api: httpx.AsyncClient, cid: str, value: Any, field: str
) -> None:
    """Not as a failure of each form `input` may take (string, message, list) in turn."""
    response = await api.post(f"{helper_path(cid)}/turns", json={"input": value})
    body = assert_problem(response, 422, field)
    assert [e["field"] for e in body["errors"]] == [field]


@pytest.mark.parametrize("content", [b"", b"null", b"[]", b'"hi"'])
async def test_whole_body_errors_do_not_blame_the_body_field(
    api: httpx.AsyncClient, cid: str, content: bytes
) -> None:
    """`body` is a field of a turn; an error about the request as a whole must not look like
    one about that field."""
    response = await api.post(f"{helper_path(cid)}/turns", **raw(content))
    body = assert_problem(response, 422)
    assert [e["field"] for e in body["errors"]] == ["(request body)"]
    wrong_field = await api.post(f"{helper_path(cid)}/turns", json={"input": "hi", "body": 1})
    assert [e["field"] for e in assert_problem(wrong_field, 422)["errors"]] == ["body"]


async def test_bad_submission_to_existing_conversation_writes_nothing(
    api: httpx.AsyncClient, engine: AsyncEngine, done: dict[str, Any]
) -> None:
    cid = done["conversation_id"]
    before = await stored_rows(engine, cid)
    for request_kw, status, field in (p.values for p in BAD_SUBMISSIONS):
        response = await api.post(f"{helper_path(cid)}/turns", **request_kw)
        assert_problem(response, status, field)
    assert await stored_rows(engine, cid) == before


@pytest.mark.parametrize(
    ("key", "field"),
    [
        pytest.param("", "Idempotency-Key", id="empty"),
        pytest.param("k" * 256, "Idempotency-Key", id="too-long"),
    ],
)
async def test_bad_idempotency_key(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str, key: str, field: str
) -> None:
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "hi"}, headers={"Idempotency-Key": key}
    )
    assert_problem(response, 422, field)
    assert await stored_rows(engine, cid) == NOTHING


# -- parent_id and Idempotency-Key conflicts --------------------------------------------------


async def test_parent_id_unknown_on_first_submission(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str
) -> None:
    response = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "hi", "parent_id": "msg_nope"}
    )
    body = assert_problem(response, 422, "parent_id")
    assert [e["field"] for e in body["errors"]] == ["parent_id"]
    assert await stored_rows(engine, cid) == NOTHING


async def test_parent_id_of_another_conversation(
    api: httpx.AsyncClient, engine: AsyncEngine, done: dict[str, Any], other: dict[str, Any]
) -> None:
    cid = done["conversation_id"]
    before = await stored_rows(engine, cid)
    for mode in ("submit", "wait", "stream"):
        response = await api.post(
            f"{helper_path(cid)}/turns",
            json={"input": "hi", "mode": mode, "parent_id": other["message_id"]},
        )
        assert_problem(response, 422, "parent_id")
    assert await stored_rows(engine, cid) == before


async def test_idempotency_key_with_different_body_conflicts(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str
) -> None:
    url = f"{helper_path(cid)}/turns"
    headers = {"Idempotency-Key": "bad-input-409"}
    first = await api.post(url, json={"input": "original"}, headers=headers)
    assert first.status_code == 202, first.text
    original = first.json()
    for changed in (
        {"input": "different"},
        {"input": "original", "body": {"x": 1}},
        {"input": "original", "mode": "wait", "client_tools": [{"name": "t"}]},
    ):
        clash = await api.post(url, json=changed, headers=headers)
        body = assert_problem(clash, 409, "Idempotency-Key")
        assert body["turn_id"] == original["turn_id"]
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sql(
                    "SELECT t.id, t.request FROM turns t JOIN conversations c"
                    " ON c.uid = t.conversation_uid WHERE c.id = :c"
                ),
                {"c": cid},
            )
        ).all()
    assert len(rows) == 1
    turn_id, request = rows[0]
    assert turn_id == original["turn_id"]
    assert request["messages"][0]["parts"] == [{"type": "text", "text": "original"}]
    assert request.get("body", {}) == {} and "parent_id" not in request
    # The original turn still runs, on its own input.
    again = await api.post(url, json={"input": "original", "mode": "wait"}, headers=headers)
    assert again.status_code == 200 and again.json()["turn_id"] == original["turn_id"]
    assert again.json()["status"] == "completed"
    assert again.json()["message"]["parts"][-1]["text"] == "echo: original"


# -- body size --------------------------------------------------------------------------------


def padded(prefix: bytes, suffix: bytes, size: int) -> bytes:
    """Valid JSON of exactly `size` bytes: `prefix`, then x's, then `suffix`."""
    return prefix + b"x" * (size - len(prefix) - len(suffix)) + suffix


async def chunked(data: bytes) -> AsyncIterator[bytes]:
    """A body without Content-Length (Transfer-Encoding: chunked)."""
    for i in range(0, len(data), 64 * 1024):
        yield data[i : i + 64 * 1024]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("route", ["turns", "conversations"])
async def test_body_over_limit(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str, declared: bool, route: str
) -> None:
    if route == "turns":
        url = f"{helper_path(cid)}/turns"
        data = padded(b'{"input": "', b'"}', LIMIT + 1)
    else:
        url = "/v1/agents/helper/conversations"
        data = padded(b'{"id": "' + cid.encode() + b'", "metadata": {"x": "', b'"}}', LIMIT + 1)
    assert len(data) == LIMIT + 1
    content = data if declared else chunked(data)
    response = await api.post(url, content=content, headers=JSON)
    if not declared:
        assert "content-length" not in response.request.headers
    assert str(LIMIT) in assert_problem(response, 413)["detail"]
    assert await stored_rows(engine, cid) == NOTHING


async def test_body_at_limit_is_read(api: httpx.AsyncClient, engine: AsyncEngine, cid: str) -> None:
    """Exactly the limit is allowed: this one fails validation (422), not the size check."""
    data = padded(b'{"input": "hi", "junk": "', b'"}', LIMIT)
    for content in (data, chunked(data)):
        response = await api.post(f"{helper_path(cid)}/turns", content=content, headers=JSON)
        assert_problem(response, 422, "junk")
    assert await stored_rows(engine, cid) == NOTHING


# -- paths: conversation ids, agents, conversations, turns ------------------------------------

BAD_IDS = [
    pytest.param("has%20space", id="space"),
    pytest.param("-leading-dash", id="leading-dash"),
    pytest.param("c" * 129, id="too-long"),
    pytest.param("trailing-newline%0A", id="newline"),
    pytest.param("nul%00", id="nul"),
    pytest.param("caf%C3%A9", id="non-ascii"),
    pytest.param("a:b%20", id="trailing-space"),
]


def routes(cid: str, turn_id: str = "turn_0000000000000000") -> list[tuple[str, str]]:
    """Every route under a conversation, as (method, path)."""
    conv = f"/v1/agents/helper/conversations/{cid}"
    return [
        ("GET", conv),
        ("GET", f"{conv}/messages"),
        ("POST", f"{conv}/turns"),
        ("GET", f"{conv}/turns"),
        ("GET", f"{conv}/turns/{turn_id}"),
        ("GET", f"{conv}/turns/{turn_id}/stream"),
    ]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_conversation_id_in_path(
    api: httpx.AsyncClient, engine: AsyncEngine, bad: str
) -> None:
    for method, path in routes(bad):
        kw: dict[str, Any] = {"json": {"input": "hi"}} if method == "POST" else {}
        response = await api.request(method, path, **kw)
        assert_problem(response, 422, "cid")
    if "%00" not in bad:  # Postgres could not even look a NUL up
        assert await stored_rows(engine, unquote(bad)) == NOTHING


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("has space", id="space"),
        pytest.param("-dash", id="leading-dash"),
        pytest.param("c" * 129, id="too-long"),
        pytest.param("", id="empty"),
        pytest.param("a\nb", id="newline"),
        pytest.param("ok\n", id="trailing-newline"),
        pytest.param("a\u0000", id="nul"),
        pytest.param(5, id="int"),
        pytest.param(["c1"], id="list"),
    ],
)
async def test_create_conversation_bad_id(
    api: httpx.AsyncClient, engine: AsyncEngine, bad: Any
) -> None:
    response = await api.post("/v1/agents/helper/conversations", json={"id": bad})
    assert_problem(response, 422, "id")
    if isinstance(bad, str) and "\x00" not in bad:  # Postgres could not even look NUL up
        assert (await stored_rows(engine, bad))[0] == 0


@pytest.mark.parametrize(
    ("request_kw", "status", "field"),
    [
        pytest.param(body({"metadata": "x"}), 422, "metadata", id="metadata-str"),
        pytest.param(body({"metadata": []}), 422, "metadata", id="metadata-list"),
        pytest.param(body({"metadata": 5}), 422, "metadata", id="metadata-int"),
        pytest.param(body({"metadata": {"k": "\u0000"}}), 422, "metadata", id="metadata-nul"),
        pytest.param(raw(b'{"metadata": {"k": NaN}}'), 422, "metadata", id="metadata-nan"),
        pytest.param(body({"name": "x"}), 422, "name", id="unknown-field"),
        pytest.param(body([]), 422, None, id="json-array"),
        pytest.param(body("c1"), 422, None, id="json-string"),
        pytest.param(raw(b'{"metadata": '), 400, None, id="malformed-json"),
        pytest.param(raw(b'{"metadata": {}}', "text/plain"), 400, None, id="text-plain"),
    ],
)
async def test_create_conversation_bad_body(
    api: httpx.AsyncClient,
    engine: AsyncEngine,
    cid: str,
    request_kw: dict[str, Any],
    status: int,
    field: str | None,
) -> None:
    # Give the request a known id where the body is an object, so a stray row would show.
    if "json" in request_kw and isinstance(request_kw["json"], dict):
        request_kw = {"json": {"id": cid, **request_kw["json"]}}
    elif request_kw.get("content", b"").startswith(b'{"metadata"'):
        request_kw = {
            **request_kw,
            "content": request_kw["content"].replace(b"{", b'{"id": "' + cid.encode() + b'", ', 1),
        }
    response = await api.post("/v1/agents/helper/conversations", **request_kw)
    assert_problem(response, status, field)
    assert await stored_rows(engine, cid) == NOTHING


async def test_unknown_agent_on_every_route(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str, done: dict[str, Any]
) -> None:
    known = done["conversation_id"]
    for conversation in (cid, known):
        paths = [
            ("POST", "/v1/agents/nobody/conversations"),
            *[
                (m, p.replace("/agents/helper/", "/agents/nobody/"))
                for m, p in routes(conversation, done["turn_id"])
            ],
        ]
        for method, path in paths:
            kw: dict[str, Any] = {}
            if method == "POST":
                kw["json"] = {"input": "hi"} if path.endswith("/turns") else {"id": cid}
            response = await api.request(method, path, **kw)
            assert "nobody" in assert_problem(response, 404)["detail"], (method, path)
    assert await stored_rows(engine, cid) == NOTHING


async def test_unknown_conversation(api: httpx.AsyncClient, engine: AsyncEngine, cid: str) -> None:
    for method, path in routes(cid):
        if method == "POST":
            continue  # submitting a turn creates the conversation
        response = await api.request(method, path)
        assert cid in assert_problem(response, 404)["detail"], path
    assert await stored_rows(engine, cid) == NOTHING


async def test_conversation_of_another_agent(api: httpx.AsyncClient, done: dict[str, Any]) -> None:
    """Conversation ids are per agent: the helper's conversation is unknown to `assistant`."""
    for method, path in routes(done["conversation_id"], done["turn_id"]):
        if method == "POST":
            continue
        path = path.replace("/agents/helper/", "/agents/assistant/")
        assert_problem(await api.request(method, path), 404)


@pytest.mark.parametrize("suffix", ["", "/stream"])
@pytest.mark.parametrize("turn_id", ["turn_0000000000000000", "OTHER"], ids=["unknown", "other"])
async def test_unknown_turn(
    api: httpx.AsyncClient,
    done: dict[str, Any],
    other: dict[str, Any],
    turn_id: str,
    suffix: str,
) -> None:
    if turn_id == "OTHER":
        # A turn that exists, but in another conversation.
        turn_id = other["turn_id"]
        assert (await api.get(other["status_url"] + suffix)).status_code == 200
    response = await api.get(f"{helper_path(done['conversation_id'])}/turns/{turn_id}{suffix}")
    assert turn_id in assert_problem(response, 404)["detail"]


@pytest.mark.parametrize("suffix", ["", "/stream"])
@pytest.mark.parametrize(
    "turn_id",
    [
        pytest.param("t" * 200, id="long"),
        pytest.param("has%20space", id="space"),
        pytest.param("-dash", id="leading-dash"),
        pytest.param("nul%00", id="nul"),
    ],
)
async def test_malformed_turn_id(
    api: httpx.AsyncClient, done: dict[str, Any], turn_id: str, suffix: str
) -> None:
    response = await api.get(f"{helper_path(done['conversation_id'])}/turns/{turn_id}{suffix}")
    assert_problem(response, 422, "turn_id")


# -- query parameters and headers -------------------------------------------------------------


@pytest.mark.parametrize(
    "leaf_id",
    [
        pytest.param("msg_nope", id="unknown"),
        pytest.param("OTHER", id="another-conversations-message"),
        pytest.param("x" * 2000, id="long"),
    ],
)
async def test_leaf_id_not_in_conversation(
    api: httpx.AsyncClient, done: dict[str, Any], other: dict[str, Any], leaf_id: str
) -> None:
    if leaf_id == "OTHER":
        leaf_id = other["message_id"]
    response = await api.get(
        f"{helper_path(done['conversation_id'])}/messages", params={"leaf_id": leaf_id}
    )
    assert leaf_id[:20] in assert_problem(response, 404)["detail"]


@pytest.mark.parametrize(
    "leaf_id", [pytest.param("", id="empty"), pytest.param("m\u0000", id="nul")]
)
async def test_leaf_id_malformed(
    api: httpx.AsyncClient, done: dict[str, Any], leaf_id: str
) -> None:
    response = await api.get(
        f"{helper_path(done['conversation_id'])}/messages", params={"leaf_id": leaf_id}
    )
    assert_problem(response, 422, "leaf_id")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"status": "bogus"}, "status", id="status-unknown"),
        pytest.param({"status": "COMPLETED"}, "status", id="status-case"),
        pytest.param({"status": ""}, "status", id="status-empty"),
        pytest.param([("status", "completed"), ("status", "nope")], "status", id="status-second"),
        pytest.param({"limit": "0"}, "limit", id="limit-zero"),
        pytest.param({"limit": "-1"}, "limit", id="limit-negative"),
        pytest.param({"limit": "501"}, "limit", id="limit-huge"),
        pytest.param({"limit": "99999999999999999999999"}, "limit", id="limit-overflow"),
        pytest.param({"limit": "ten"}, "limit", id="limit-word"),
        pytest.param({"limit": "1.5"}, "limit", id="limit-float"),
        pytest.param({"limit": ""}, "limit", id="limit-empty"),
    ],
)
async def test_list_turns_bad_query(
    api: httpx.AsyncClient, done: dict[str, Any], params: Any, field: str
) -> None:
    response = await api.get(f"{helper_path(done['conversation_id'])}/turns", params=params)
    assert_problem(response, 422, field)


@pytest.mark.parametrize("value", ["abc", "1.5", "1e3", "0x10", "½", "1_0", "+3", "\u0663"])
async def test_last_event_id_not_an_integer(
    api: httpx.AsyncClient, done: dict[str, Any], value: str
) -> None:
    response = await api.get(done["stream_url"], headers={"Last-Event-ID": value.encode()})
    assert_problem(response, 400, "Last-Event-ID")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"1" * 4301, id="past-int-conversion-limit"),
        pytest.param(b"9" * 21, id="21-digits"),
        pytest.param(b"-" + b"9" * 21, id="21-digits-negative"),
        pytest.param(b"5\xa0", id="trailing-nbsp"),
        pytest.param(b"5\x85", id="trailing-nel"),
        pytest.param(b"\x1f5", id="leading-unit-separator"),
    ],
)
async def test_last_event_id_not_a_sequence_number(
    api: httpx.AsyncClient, done: dict[str, Any], value: bytes
) -> None:
    """Past 20 digits is no sequence number (and past 4,300 `int()` raises: a 500), and
    Python's `strip()` would have read Unicode whitespace around digits as nothing."""
    response = await api.get(done["stream_url"], headers={"Last-Event-ID": value})
    body = assert_problem(response, 400, "Last-Event-ID")
    assert body["errors"] == [{"field": "Last-Event-ID", "message": body["errors"][0]["message"]}]


@pytest.mark.parametrize("value", ["99999999999999999999", "9223372036854775808", "-5", "0"])
async def test_last_event_id_odd_integers_still_stream(
    api: httpx.AsyncClient, done: dict[str, Any], value: str
) -> None:
    response = await api.get(done["stream_url"], headers={"Last-Event-ID": value})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize("before", ["0.5", "1700000000", "-1", "tomorrow"])
async def test_delete_turns_before_must_be_a_date(
    api: httpx.AsyncClient, done: dict[str, Any], before: str
) -> None:
    """`before=0.5` was read as 0.5 s after 1970 (and deleted nothing, silently)."""
    path = f"{helper_path(done['conversation_id'])}/turns"
    response = await api.delete(path, params={"before": before})
    assert_problem(response, 422, "before")


# -- duplicate keys ---------------------------------------------------------------------------


def duplicate_key_cases(cid: str, turn_id: str, message_id: str) -> list[Any]:
    """Every route that reads a JSON body, each with a body that names a key twice, and the
    field the answer must name. Python keeps the last; a proxy or an audit log may keep the
    first: `{"approved": "yes", "approved": false}` would be logged as approved and denied."""
    conv = helper_path(cid)
    turn = f"{conv}/turns/{turn_id}"
    return [
        ("POST", "/v1/agents/helper/conversations", '{"id": "a", "id": "b"}', "id"),
        ("POST", "/v1/agents/helper/conversations", '{"metadata": {"k": 1, "k": 2}}', "metadata.k"),
        ("POST", f"{conv}/turns", '{"input": "hi", "input": "bye"}', "input"),
        ("POST", f"{conv}/turns", '{"input": "hi", "body": {"a": {"k": 1, "k": 2}}}', "body.a.k"),
        (
            "POST",
            f"{conv}/turns",
            '{"input": {"role": "user", "parts": [{"type": "text", "text": "a", "text": "b"}]}}',
            "input.parts.0.text",
        ),
        (
            "POST",
            f"{conv}/messages",
            '{"messages": [{"role": "user", "role": "assistant", "parts": []}]}',
            "messages.0.role",
        ),
        ("PUT", f"{conv}/active-leaf", f'{{"leaf_id": "{message_id}", "leaf_id": "x"}}', "leaf_id"),
        (
            "POST",
            f"{conv}/regenerate",
            f'{{"message_id": "{message_id}", "mode": "a", "mode": "b"}}',
            "mode",
        ),
        ("POST", f"{turn}/cancel", '{"reason": "a", "reason": "b"}', "reason"),
        ("POST", f"{turn}/approvals/ap_1", '{"approved": "yes", "approved": false}', "approved"),
        ("POST", f"{turn}/tool-results/call_1", '{"output": 1, "output": 2}', "output"),
    ]


async def test_a_duplicate_key_is_refused_on_every_body(
    api: httpx.AsyncClient, engine: AsyncEngine, done: dict[str, Any]
) -> None:
    """400 naming the key (dotted, where it is), on every route with a JSON body, before
    anything is read from the body: what one reader and another read must not differ."""
    cid = done["conversation_id"]
    before = await stored_rows(engine, cid)
    cases = duplicate_key_cases(cid, done["turn_id"], done["message_id"])
    for method, path, content, field in cases:
        response = await api.request(method, path, **raw(content.encode()))
        problem = assert_problem(response, 400, field)
        assert [e["field"] for e in problem["errors"]] == [field], (path, problem)
    assert await stored_rows(engine, cid) == before


async def test_the_same_key_in_different_objects_is_no_duplicate(
    api: httpx.AsyncClient, cid: str
) -> None:
    content = b'{"input": "hi", "body": {"a": {"k": 1}, "b": {"k": 2}, "k": 3}}'
    response = await api.post(f"{helper_path(cid)}/turns", **raw(content))
    assert response.status_code == 202, response.text


# -- methods and unknown paths ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/v1/agents", "GET, HEAD"),
        ("DELETE", "/v1/agents/helper/conversations", "GET, HEAD, POST"),
        ("PUT", "/v1/agents/helper/conversations/CID", "DELETE, GET, HEAD"),
        ("PUT", "/v1/agents/helper/conversations/CID/messages", "GET, HEAD, POST"),
        ("PUT", "/v1/agents/helper/conversations/CID/turns", "DELETE, GET, HEAD, POST"),
        ("PATCH", "/v1/agents/helper/conversations/CID/turns/turn_x", "DELETE, GET, HEAD"),
        ("POST", "/v1/agents/helper/conversations/CID/turns/turn_x/stream", "GET, HEAD"),
        ("POST", "/healthz", "GET, HEAD"),
    ],
)
async def test_method_not_allowed(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str, method: str, path: str, allowed: str
) -> None:
    """`Allow` lists every method of the path, not only those of the first route that
    matched it (`allow: POST` on .../turns, which has GET and DELETE too)."""
    response = await api.request(method, path.replace("CID", cid), json={"input": "hi"})
    assert_problem(response, 405)
    assert response.headers["allow"] == allowed
    assert await stored_rows(engine, cid) == NOTHING


@pytest.mark.parametrize(
    "path",
    [
        "/healthz",
        "/v1/agents",
        "/v1/agents/helper/conversations/CID",
        "/v1/agents/helper/conversations/CID/turns/TURN",
        "/v1/agents/helper/conversations/CID/turns/TURN/stream",
        "/v1/agents/helper/conversations/nope",
    ],
)
async def test_head_is_get_without_a_body(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, path: str
) -> None:
    turn = (
        await api.post(
            f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "hi", "mode": "wait"}
        )
    ).json()
    path = path.replace("CID", cid).replace("TURN", turn["turn_id"])
    got = await api.get(path)
    head = await api.head(path)
    assert head.status_code == got.status_code
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.content == b""


@pytest.mark.parametrize(
    "path", ["/v1/nope", "/v1/agents/helper", "/v1/agents/helper/conversations/c1/unknown"]
)
async def test_unknown_path(api: httpx.AsyncClient, path: str) -> None:
    assert_problem(await api.get(path), 404)
