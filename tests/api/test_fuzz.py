"""Schemathesis against the live gateway's own OpenAPI document: no 5xx, every answer's status
declared for its operation, every body and content type the one the document gives.

Bounded and seeded (`derandomize`, a fixed number of examples per operation), so a run is
the same run every time and takes seconds. Path parameters name a real agent, conversation,
turn and message, so the cases get past the 404s into the handlers; the 404s themselves, and
the other tenants' ids, are tests/api/test_probes.py's. Nothing is exempted: the document says
what the server refuses, so schemathesis's positive and negative cases are answered as it
expects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.checks import load_all_checks
from schemathesis.core.parameters import ParameterLocation

from api.app import create_app
from tests._stack import Stack, extra_gateway
from think.server import Settings

pytestmark = pytest.mark.stack
"""Every test here fuzzes the live gateway: `make test-fast` does not even import the file
(building its cases costs ~15 s at collection; tests/conftest.py, `pytest_ignore_collect`)."""

EXAMPLES = 25
"""Per operation, positive and negative cases drawn together: ~500 requests in all."""

load_all_checks()
CHECKS = [check for check in REGISTERED_CHECKS.get_all() if callable(check)]
"""Every check schemathesis has, positive_data_acceptance and negative_data_rejection too:
the document says exactly what the server accepts, no more and no less."""


REAL = {"agent": "helper", "cid": "fuzz", "turn_id": "fuzz-turn", "message_id": "fuzz-message"}
"""The path parameters every case names: a real agent, conversation, turn and message (made by
`answer_id`), so the cases get past the 404s into the handlers. Fixed rather than drawn,
so schemathesis neither draws them invalid nor knows nothing about them, and the same in every
run (the stack's database is new each session)."""


@pytest.fixture(scope="module")
def answer_id(stack: Stack) -> str:
    """Makes the conversation `REAL` names, with a finished turn after a user message; the
    turn's answer (an assistant message, whose id is the server's choice)."""
    message = {"id": REAL["message_id"], "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    with httpx.Client(base_url=stack.api_url, timeout=30) as api:
        turn = api.post(
            f"/v1/agents/{REAL['agent']}/conversations/{REAL['cid']}/turns",
            json={"input": message, "mode": "wait", "submission_id": REAL["turn_id"]},
        ).json()
    assert turn["status"] == "completed" and turn["turn_id"] == REAL["turn_id"], turn
    return str(turn["message_id"])


ENDS_A_CONVERSATION = {
    ("DELETE", "/v1/agents/{agent}/conversations/{cid}"),
    ("POST", "/v1/agents/{agent}/conversations/{cid}/clear"),
}
"""Operations that delete or clear the conversation they name: run on `REAL`'s, they would
leave the cases after them no turn or message to get past the 404s with. Their cases name a
conversation of their own instead, made again before each."""
OWN_CID = "fuzz-ended"
ERASES_A_TENANT = ("DELETE", "/v1/tenant-data")
"""Erases the caller's tenant: its cases go to a gateway of their own, as a tenant of their own
(`eraser`), so that they erase nothing the other cases (or other tests) use."""


# The document the gateway serves at /openapi.json is built by this same code (checked
# below), and parametrizing needs it at collection time, before the stack is up.
DOCUMENT = create_app(Settings()).openapi()
schema = schemathesis.openapi.from_dict(
    DOCUMENT,
    config=schemathesis.Config.from_dict(
        {"parameters": {f"path.{name}": value for name, value in REAL.items()}}
    ),
)


@pytest.fixture(scope="module")
def eraser(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_API_KEYS": "fuzz-eraser-key:fuzz-eraser"}
    with extra_gateway(env, tmp_path_factory.mktemp("fuzz-eraser")) as url:
        yield url


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
def test_no_undocumented_answer(case: Any, answer_id: str, stack: Stack, eraser: str) -> None:
    if isinstance(case.body, dict) and not _negative_body(case):
        # Valid values for valid ones, the body stays valid: a real message to branch from and
        # an answer to regenerate, as the path ids are real (an unknown one, or a user message
        # to regenerate, is a 422 the document cannot foresee: which ids exist is not a
        # schema's business), and a turn queued behind the fuzzer's other turns must not hold
        # the run for an hour.
        if isinstance(case.body.get("parent_id"), str):
            case.body["parent_id"] = REAL["message_id"]
        if case.operation.path.endswith("/regenerate"):
            case.body["message_id"] = answer_id
        if case.body.get("mode") == "wait":
            case.body["wait_timeout"] = min(case.body.get("wait_timeout") or 5, 5)
    if (case.operation.method.upper(), case.operation.path) in ENDS_A_CONVERSATION:
        case.path_parameters["cid"] = OWN_CID
        made = httpx.post(
            f"{stack.api_url}/v1/agents/{REAL['agent']}/conversations",
            json={"id": OWN_CID},
            timeout=30,
        )
        assert made.status_code in (200, 201), made.text
    if (case.operation.method.upper(), case.operation.path) == ERASES_A_TENANT:
        auth = {"Authorization": "Bearer fuzz-eraser-key"}
        case.call_and_validate(base_url=eraser, headers=auth, checks=CHECKS, timeout=60)
        return
    case.call_and_validate(base_url=stack.api_url, checks=CHECKS, timeout=60)


def _negative_body(case: Any) -> bool:
    """Whether the case was drawn invalid in its body."""
    return case.meta is not None and bool(case.meta.is_negative_at(ParameterLocation.BODY))
