"""Schemathesis against the live gateway's own OpenAPI document: no 5xx, every answer's status
declared for its operation, every body and content type the one the document gives.

Bounded and seeded (`derandomize`, a fixed number of examples per operation), so a run is
the same run every time and takes seconds. Path parameters name a real agent, conversation
and turn, so the cases get past the 404s into the handlers; the 404s themselves, and the
other tenants' ids, are tests/test_probes.py's.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from tests._stack import Stack
from think.server import Settings

EXAMPLES = 25
"""Per operation, positive and negative cases drawn together: ~500 requests in all."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def real_ids(stack: Stack) -> dict[str, str]:
    """A conversation of a real agent with a finished turn and its messages."""
    cid = f"fuzz-{secrets.token_hex(4)}"
    with httpx.Client(base_url=stack.api_url, timeout=30) as api:
        turn = api.post(
            f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "hi", "mode": "wait"}
        ).json()
        assert turn["status"] == "completed", turn
    return {
        "agent": "helper",
        "cid": cid,
        "turn_id": turn["turn_id"],
        "message_id": turn["message_id"],
    }


# The document the gateway serves at /openapi.json is built by this same code (checked
# below), and parametrizing needs it at collection time, before the stack is up.
DOCUMENT = create_app(Settings()).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT)


def test_the_served_document_is_the_one_fuzzed(stack: Stack) -> None:
    assert httpx.get(f"{stack.api_url}/openapi.json").json() == DOCUMENT


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_undocumented_answer(case: Any, real_ids: dict[str, str], stack: Stack) -> None:
    if case.path_parameters:
        case.path_parameters = {
            name: real_ids.get(name, value) for name, value in case.path_parameters.items()
        }
    if isinstance(case.body, dict) and case.body.get("mode") == "wait":
        # A turn queued behind the fuzzer's other turns must not hold the run for an hour.
        case.body["wait_timeout"] = 5
    case.call_and_validate(base_url=stack.api_url, checks=CHECKS, timeout=60)
