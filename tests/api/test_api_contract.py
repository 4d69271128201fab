"""The HTTP contract in the repo, docs/api.md, is the one the gateway serves.

docs/api.md names its routes as `METHOD /path` in code spans: in its tables' first column,
on a line of their own (`POST …/turns`) and in the text of "Operations". A path may start
with `.../conversations/`, short for `/v1/agents/{agent}/conversations/`; a span such as
`GET .../stream` in running text is a reference back to a route listed in full, and must name
exactly one of them by its end.

Checked against the app's OpenAPI document: every documented route is served with that
method, and every route of the document is documented unless its operation is marked as an
extension (`openapi_extra={"x-think-extension": True}`: API.md allows endpoints beyond the
contract). A few documented routes are by nature outside the OpenAPI document (`GET /docs`,
the page that renders it); they must still be routes of the app. The documented routes that
no code serves yet are listed in `NOT_SERVED_YET`, and the list must stay exact, so the test
fails once one of them is built, until it is taken off.

docs/api.md holds the API contract this service implements, every line of it: `API.md`, kept
by the project workspace in its shared folder (`../shared`, beside the clone, with the design
notes), with what `API-next.md` there adds as it lands. tests/api/API.md is a pinned copy of
it, so the check runs in every clone; where the workspace's folder sits beside the clone, the
copy must also equal its source.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from api.app import create_app
from think.server import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
PINNED = ROOT / "tests" / "api" / "API.md"
WORKSPACE = ROOT.parent / "shared" / "API.md"

AGENT_PREFIX = "/v1/agents/{agent}"
SHORT_PREFIX = ".../conversations/"
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) ([^`\s]+)`")
EXTENSION = "x-think-extension"
NOT_SERVED_YET: set[tuple[str, str]] = set()
"""Documented in API.md's "Operations", not built yet: nothing, now."""

Route = tuple[str, str]


ADDITIONS = "\n## Additions"
"""Where the additions of API-next.md begin in docs/api.md: a reference in the contract before
it names one of the contract's routes (an addition may end as one of them does: `GET
…/chat/{id}/stream`), a reference after it one of all the routes listed."""


def documented_routes(doc: str) -> set[Route]:
    """The routes the contract lists, with their paths in full; a reference that names no
    listed route, or more than one, fails here."""
    contract, _, additions = doc.partition(ADDITIONS)
    first = _listed_routes(contract, set())
    return _listed_routes(additions, first)


def _listed_routes(doc: str, before: set[Route]) -> set[Route]:
    """`before` and the routes `doc` lists, its references checked against them."""
    listed = set(before)
    references: list[Route] = []
    for method, path in ROUTE.findall(doc):
        if path.startswith(SHORT_PREFIX):
            listed.add((method, AGENT_PREFIX + path[len("...") :]))
        elif path.startswith("..."):
            references.append((method, path[len("...") :]))
        else:
            listed.add((method, path))
    for method, tail in references:
        meant = [r for r in listed if r[0] == method and r[1].endswith(tail)]
        assert len(meant) == 1, f"`{method} ...{tail}` names {meant or 'no listed route'}"
    return listed


def openapi_routes(app: FastAPI) -> dict[Route, dict[str, Any]]:
    """The app's OpenAPI operations by method and path."""
    return {
        (method.upper(), path): operation
        for path, operations in app.openapi()["paths"].items()
        for method, operation in operations.items()
    }


def routes_outside_the_schema(app: FastAPI) -> set[Route]:
    """Routes the app serves that its OpenAPI document leaves out (its docs pages)."""
    found: set[Route] = set()
    for route in app.routes:
        path = getattr(route, "path", None)
        methods = getattr(route, "methods", None) or set()
        in_schema = isinstance(route, APIRoute) and route.include_in_schema
        if path is not None and not in_schema:
            found |= {(method, path) for method in methods if method != "HEAD"}
    return found


@pytest.fixture(scope="module")
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


def test_every_documented_route_is_served(app: FastAPI) -> None:
    documented = documented_routes(DOC.read_text())
    served = set(openapi_routes(app)) | routes_outside_the_schema(app)
    missing = documented - served
    assert missing == NOT_SERVED_YET, (
        f"documented but not served: {sorted(missing - NOT_SERVED_YET)}; "
        f"served now, so no longer NOT_SERVED_YET: {sorted(NOT_SERVED_YET - missing)}"
    )


def test_every_route_of_the_openapi_document_is_documented(app: FastAPI) -> None:
    documented = documented_routes(DOC.read_text())
    undocumented = {
        route
        for route, operation in openapi_routes(app).items()
        if route not in documented and not operation.get(EXTENSION)
    }
    assert undocumented == set(), (
        f"in the OpenAPI document but not in docs/api.md: {sorted(undocumented)} (document "
        f'them, or mark an extension with openapi_extra={{"{EXTENSION}": True}})'
    )


def test_the_routes_are_read_from_the_doc() -> None:
    """The parser reads each way the doc names a route, so the checks above check something."""
    documented = documented_routes(DOC.read_text())
    assert ("POST", "/v1/agents/{agent}/conversations/{cid}/turns") in documented
    assert ("GET", "/v1/agents/{agent}/conversations/{cid}/turns/{turn_id}/stream") in documented
    assert ("GET", "/readyz") in documented
    assert len(documented) >= 25


def test_docs_api_md_is_the_shared_contract(not_run: Callable[[str], None]) -> None:
    """docs/api.md holds the contract (tests/api/API.md), every line of it, in order: what
    the contract's next additions add as they land comes between its lines, and nothing of
    it is changed or dropped."""
    ours = iter(DOC.read_text().splitlines())
    missing = [line for line in PINNED.read_text().splitlines() if line not in ours]
    assert missing == [], (
        "docs/api.md changed or dropped these lines of the API contract (tests/api/API.md; "
        f"add to the contract, never change it): {missing[:3]}"
    )
    if WORKSPACE.exists():
        assert PINNED.read_text() == WORKSPACE.read_text(), (
            f"the project workspace's API contract ({WORKSPACE}) changed: copy it to "
            "tests/api/API.md, and docs/api.md follows"
        )
    else:
        not_run(
            "the pinned API contract (tests/api/API.md) was not compared with its source: "
            "API.md in the project workspace's shared folder, ../shared beside this clone, "
            "which a clone on its own does not have (docs/api.md was checked against the copy)"
        )
