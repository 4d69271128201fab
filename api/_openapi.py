"""The OpenAPI document declares every status an operation can answer, with its real body.

Statuses that come from the gateway's machinery rather than from a route (401 from the key
check, 404 for an unknown agent or conversation, 400/413 while reading a body, 422 from
validation, 503 while Postgres is away) are the same on many operations; they are added here,
from what each operation has (a body, path parameters, the `/v1` prefix), so a new route is
documented without anyone listing them by hand. Every error body is a problem document
(`application/problem+json`), FastAPI's default `HTTPValidationError` included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api.errors import PROBLEM
from api.schemas import STORABLE, STORABLE_JSON, STORABLE_OBJECT, Problem

PROBLEM_REF = "#/components/schemas/Problem"

_WHY = {
    400: "The body is not JSON, or a header is malformed",
    401: "No valid `Authorization: Bearer <key>` (when keys are configured)",
    404: "No such agent, conversation or resource for this tenant",
    413: "The body is larger than THINK_MAX_BODY_BYTES",
    422: "A field has the wrong type or value; `errors` names it",
    429: "Over a per-tenant limit (submissions a minute, open streams) or, for a submission, "
    "a daily budget (type `/problems/budget-exhausted`); retry after `Retry-After` seconds",
    503: "Postgres or Temporal is unavailable for the moment; retry after `Retry-After`",
}


_LIMITED = {("post", "turns"), ("post", "regenerate"), ("get", "stream")}
"""Operations under a per-tenant limit (api/_limits.py): submissions, and open streams."""


def statuses(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    """The machinery's statuses this operation can answer, beside its own."""
    found = {503} if path != "/healthz" else set()
    if path.startswith("/v1/"):
        found |= {401}
    if "{" in path:
        found |= {404}
    if operation.get("parameters") or "requestBody" in operation:
        found |= {422}
    if "requestBody" in operation:
        found |= {400, 413}
    if any(p.get("in") == "header" for p in operation.get("parameters", [])):
        found |= {400}
    if (method, path.rsplit("/", 1)[-1]) in _LIMITED:
        found |= {429}
    return found


def described(statuses: Mapping[int, str]) -> dict[int | str, dict[str, Any]]:
    """A route's own statuses with what each means, as FastAPI's `responses` takes them."""
    return {status: {"description": why} for status, why in statuses.items()}


def _problem_content() -> dict[str, Any]:
    return {PROBLEM: {"schema": {"$ref": PROBLEM_REF}}}


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the machinery's statuses to every operation of `schema`, in place."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    for nested, definition in components["Problem"].pop("$defs", {}).items():
        components.setdefault(nested, definition)
    components["StorableJson"] = STORABLE_JSON
    for message in ("UIMessage", "UserUIMessage"):
        if message in components:
            _describe_message(components[message])
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status in statuses(method, path, operation):
                responses.setdefault(str(status), {"description": _WHY[status]})
            for code, response in responses.items():
                content = response.get("content", {})
                default = "HTTPValidationError" in str(content)
                if code[0] in "45" and (not content or default):
                    # FastAPI's own 422 says `application/json` + HTTPValidationError.
                    response["content"] = _problem_content()
    # No operation refers to them any more.
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    return schema


_PART: dict[str, Any] = {
    **STORABLE_OBJECT,
    "required": ["type"],
    "properties": {"type": {"type": "string", "minLength": 1, "pattern": STORABLE}},
    "if": {"properties": {"type": {"const": "text"}}},
    "then": {"required": ["text"], "properties": {"text": {"type": "string"}}},
}
"""A message part as `UIMessage` checks it (a `type`; a text part's `text` a string), and
as `_unstorable` does (storable strings)."""


def _describe_message(message: dict[str, Any]) -> None:
    """`think.UIMessage`'s schema says what its validators refuse: `parts` are `dict`s to
    pydantic, checked by a validator, and every string is checked by the body's
    `_unstorable`; say both in the document (in place)."""
    properties = message.get("properties", {})
    if "parts" in properties:
        properties["parts"]["items"] = _PART
    if "id" in properties:
        properties["id"]["pattern"] = STORABLE
    if "metadata" in properties:
        properties["metadata"] = {"anyOf": [STORABLE_OBJECT, {"type": "null"}]}


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    summary=app.summary,
                    routes=app.routes,
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
