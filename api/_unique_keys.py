"""Refuse a JSON request body that names a key twice in one object (at any depth).

Python's `json` keeps the last of the duplicates; another reader (a proxy that routes on the
body, an audit log, a WAF) may keep the first. `{"approved": "yes", "approved": false}` would
be logged as an approval and applied as a denial. RFC 8259 leaves the meaning of such a body
open, so the only reading every party shares is none: 400, naming the key.

One ASGI middleware for every route, those of `api/routes`, those added later and mounted
apps alike, so no route can forget it. It checks lazily: the body is parsed when the app
first asks for it (FastAPI does, after routing, and before the route's dependencies, as for
a body that is not JSON), so a 404 or a 405 costs nothing. On the happy path that is one more
parse with an `object_pairs_hook`: about 4 µs for a turn submission, +10 % for a 16 MiB one,
against about 2 µs and 14 ms for the parse FastAPI then does anyway.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import BadBody

_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class _Duplicate(Exception):
    """Raised from the hook: the parse stops at the first object that repeats a key."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Duplicate
    return found


class _Members(list[tuple[str, Any]]):
    """An object's members in their order, duplicates kept: what `where_duplicated` walks."""


def where_duplicated(body: bytes) -> str | None:
    """The dotted path (`input.parts.0.text`, as a 422 names a field) of a key that an object
    of `body` names twice (the outermost such object's first); None when none does, or when
    `body` is not JSON at all (FastAPI answers that one itself)."""
    try:
        json.loads(body, object_pairs_hook=_unique)
        return None
    except _Duplicate:
        pass
    except (ValueError, RecursionError):  # not JSON (JSONDecodeError, UnicodeDecodeError)
        return None
    # The slow path, for a refused body only: read it again keeping every member, and walk
    # it in document order to say where the key is.
    stack: list[tuple[list[str], Any]] = [([], json.loads(body, object_pairs_hook=_Members))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Members):
            seen: set[str] = set()
            for key, _ in value:
                if key in seen:
                    return ".".join([*path, key])
                seen.add(key)
            stack.extend((([*path, key], child) for key, child in reversed(value)))
        elif isinstance(value, list):
            stack.extend(([*path, str(i)], child) for i, child in reversed(list(enumerate(value))))
    return None  # unreachable: the hook found one


def _is_json(scope: Scope) -> bool:
    """Whether FastAPI would read this request's body as JSON: a declared `application/json`
    or `application/*+json` (a body without a Content-Type is not JSON to it)."""
    name: bytes
    value: bytes
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            # What `email.message` makes of it, as FastAPI asks, in a fifth of the time.
            media_type = value.partition(b";")[0].strip().lower()
            kind, _, subtype = media_type.partition(b"/")
            return kind == b"application" and (subtype == b"json" or subtype.endswith(b"+json"))
    return False


class UniqueKeys:
    """The middleware: hands the app the whole body at its first read, once checked."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        checked = False

        async def read() -> Message:
            nonlocal checked
            if checked:
                return await receive()  # after the body: a disconnect, say
            checked = True
            chunks: list[bytes] = []
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return message  # the client went away mid-body
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)
            if (where := where_duplicated(body)) is not None:
                key = where.rpartition(".")[2]
                raise BadBody(
                    400,
                    f"the body names the key {key!r} twice in one object (at {where}); "
                    "send each key once",
                    errors=[{"field": where, "message": "duplicate key"}],
                )
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, read, send)
