"""Architecture checks for the one rule for failure (issue 31): no activity of ours is retried
without limit, and the classification of failures says what `docs/durability.md` says.

Temporal's default retry policy retries an activity for ever, and a policy without
`maximum_attempts` does too: that is how one odd model stream, or a NUL Postgres refuses,
once wedged a conversation for good. So every call that starts an activity must name a
`retry_policy`, and every `RetryPolicy` must bound its attempts."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import psycopg
import psycopg_pool
import pytest
from pydantic import BaseModel, ValidationError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from think.exceptions import ModelError
from think.storage import is_transient
from think.storage.stream_log import StaleAttempt
from think.workflows._turn._activities import (
    COMPACT_RETRY,
    DB_RETRY,
    MODEL_RETRY,
    TRANSIENT_BUDGET,
)

THINK = Path(__file__).resolve().parents[2] / "think"
STARTS_ACTIVITY = {
    "execute_activity",
    "execute_local_activity",
    "start_activity",
    "start_local_activity",
    "execute_activity_method",
    "start_activity_method",
    "execute_activity_class",
    "start_activity_class",
}


def _calls(source: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        on = func.value
        if isinstance(on, ast.Call) and isinstance(on.func, ast.Name) and on.func.id == "super":
            return ""  # an interceptor handing the call on (`think._current`), not a start
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def unbounded(source: str, where: str) -> list[str]:
    """What in `source` starts an activity without a retry policy, or builds a `RetryPolicy`
    without `maximum_attempts` (or with 0, which Temporal reads as "no limit")."""
    found = []
    for call in _calls(source):
        keywords = {k.arg: k.value for k in call.keywords}
        name = _name(call)
        if name in STARTS_ACTIVITY and "retry_policy" not in keywords and None not in keywords:
            found.append(f"{where}:{call.lineno}: {name} without retry_policy")
        if name == "RetryPolicy":
            limit = keywords.get("maximum_attempts")
            if limit is None or (isinstance(limit, ast.Constant) and limit.value in (0, None)):
                found.append(f"{where}:{call.lineno}: RetryPolicy without maximum_attempts")
    return found


def test_every_activity_of_think_has_a_bounded_retry_policy() -> None:
    found: list[str] = []
    starts = 0
    for path in sorted(THINK.rglob("*.py")):
        source = path.read_text()
        found += unbounded(source, str(path.relative_to(THINK.parent)))
        starts += sum(_name(c) in STARTS_ACTIVITY for c in _calls(source))
    assert not found, "\n".join(found)
    assert starts >= 5  # the walk does see the turn's, the after-turn's and the schedule's


@pytest.mark.parametrize(
    "source",
    [
        "workflow.execute_activity('x', 1, start_to_close_timeout=t)",
        "workflow.execute_local_activity('x', 1, start_to_close_timeout=t)",
        "RetryPolicy(initial_interval=timedelta(seconds=1))",
        "RetryPolicy(maximum_attempts=0)",
    ],
)
def test_the_check_refuses_an_unbounded_one(source: str) -> None:
    assert unbounded(source, "new.py")


def _budget(policy: RetryPolicy) -> timedelta:
    """How long `policy` retries before it gives up, not counting the attempts' own time."""
    total, interval = timedelta(0), policy.initial_interval
    ceiling = policy.maximum_interval or policy.initial_interval * 100
    for _ in range(policy.maximum_attempts - 1):
        total += interval
        interval = min(interval * policy.backoff_coefficient, ceiling)
    return total


@pytest.mark.parametrize("policy", [DB_RETRY, MODEL_RETRY, COMPACT_RETRY])
def test_transient_failures_are_retried_through_an_hour_long_outage(policy: RetryPolicy) -> None:
    assert policy.maximum_attempts > 0
    assert _budget(policy) >= TRANSIENT_BUDGET >= timedelta(minutes=30)


class _Shape(BaseModel):
    content: str


def _validation_error() -> ValidationError:
    try:
        _Shape.model_validate({"content": [{"type": "text", "text": "hi"}]})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def _wrapped(cause: BaseException) -> RuntimeError:
    try:
        raise RuntimeError("while storing the step") from cause
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (psycopg.OperationalError("connection failed: Connection refused"), True),
        (psycopg_pool.PoolTimeout("couldn't get a connection after 30 s"), True),
        (psycopg.errors.AdminShutdown(), True),  # 57P01
        (psycopg.errors.CannotConnectNow(), True),  # 57P03
        (psycopg.errors.ConnectionFailure(), True),  # 08006
        (psycopg.errors.SerializationFailure(), True),  # 40001
        (psycopg.errors.DeadlockDetected(), True),  # 40P01
        (psycopg.errors.TooManyConnections(), True),  # 53300
        (psycopg.errors.QueryCanceled(), True),  # 57014, a statement timeout
        (RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b""), True),
        (RPCError("rate limited", RPCStatusCode.RESOURCE_EXHAUSTED, b""), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (ModelError("429", retryable=True, status=429), True),
        (_wrapped(psycopg.errors.AdminShutdown()), True),
        (psycopg.errors.UntranslatableCharacter(), False),  # 22P05: a NUL in jsonb
        (psycopg.errors.CharacterNotInRepertoire(), False),  # 22021
        (psycopg.errors.UniqueViolation(), False),  # 23505
        (psycopg.errors.UndefinedColumn(), False),  # 42703, a bug
        (psycopg.errors.RaiseException(), False),  # P0001
        (RPCError("bad", RPCStatusCode.INVALID_ARGUMENT, b""), False),
        (ModelError("400", retryable=False, status=400), False),
        (_validation_error(), False),
        (KeyError("content"), False),
        (ApplicationError("ours"), False),
        (StaleAttempt("attempt 1 is stale"), False),
        (_wrapped(KeyError("content")), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_what_is_transient(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_a_failure_raised_while_handling_an_outage_is_not_transient() -> None:
    """Only explicit wrapping counts (`from`), not the exception being handled."""
    try:
        try:
            raise psycopg.errors.AdminShutdown()
        except psycopg.Error:
            raise KeyError("content") from None
    except KeyError as exc:
        assert not is_transient(exc)
