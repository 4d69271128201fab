"""One rule for failure, in one place: which failures of an activity are transient (retried
with backoff, generously, until the infrastructure recovers) and which are not (tried a few
times, then the turn ends `error`).

Transient means the same work may succeed unchanged once something outside it recovers:
Postgres or Temporal unreachable, restarting or overloaded, a connection lost mid-statement, a
pool or statement timeout, a serialization conflict or a deadlock, a rate limit. Everything
else is a fact about the work itself and fails the same way again: Postgres refusing the data
(class 22: a NUL in `jsonb`, a value out of range), an integrity violation (23), a bug
(programming errors, `KeyError`, a pydantic `ValidationError` from a model server's odd
stream). Retrying those for ever once wedged whole conversations (issue 31): each retry
called the model or ran the tool again, and every later turn stayed `pending`.

`bounded_failures` applies the rule inside an activity, where the attempt number is known;
the workflows' `RetryPolicy`s (`think.workflows._turn._activities`) bound the transient
retries too, generously.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import psycopg
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from think.exceptions import NON_TRANSIENT_FAILURE, ModelError
from think.storage._errors import TurnNotRecorded
from think.storage.stream_log import StaleAttempt, TurnChanged, TurnEnded

log = logging.getLogger("think.engine.activities")

NON_TRANSIENT_ATTEMPTS = 3
"""Attempts an activity gets for a failure that is not transient: one may still be a race
(a row read while another transaction changed it) or a model's one-off odd answer, so it is
tried again twice; a third failure ends the turn. A data error from Postgres (class 22) gets
one: the same data is refused again, and each retry would call the model or run the tool
again for nothing."""

_TRANSIENT_SQLSTATES = frozenset({"57014", "55P03", "57P01", "57P02", "57P03", "57P04"})
"""Query cancelled (a statement timeout), lock not available (a lock timeout), and the
server shutting down, crashed, starting, or its database dropped under it."""
_TRANSIENT_CLASSES = frozenset({"08", "40", "53"})
"""Connection exceptions, transaction rollbacks (serialization failure 40001, deadlock 40P01,
statement completion unknown 40003), insufficient resources (too many connections)."""
_TRANSIENT_RPC = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,  # Temporal's rate limits
        RPCStatusCode.ABORTED,
        RPCStatusCode.CANCELLED,
    }
)


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` may pass by itself, so the same work is worth retrying unchanged.

    Follows explicit wrapping (`raise … from`, SQLAlchemy's `.orig`), never `__context__`: a
    `KeyError` raised while handling a lost connection is still a `KeyError`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _transient_itself(current):
            return True
        orig = getattr(current, "orig", None)  # sqlalchemy.exc.DBAPIError wraps the driver's
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return False


def _transient_itself(exc: BaseException) -> bool:
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        if state is None:
            # Raised by the client, not the server: a connection that failed or was lost,
            # a pool timeout (`psycopg_pool.PoolTimeout`), a closed connection.
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return state in _TRANSIENT_SQLSTATES or state[:2] in _TRANSIENT_CLASSES
    if isinstance(exc, RPCError):
        return exc.status in _TRANSIENT_RPC
    if isinstance(exc, ModelError):
        return exc.retryable  # rate limits, 5xx, dropped streams
    if isinstance(exc, TurnNotRecorded):
        return True  # a commit not yet seen; its step bounds the wait (`UNRECORDED_ATTEMPTS`)
    # Socket errors, refused or reset connections, timeouts (`TimeoutError` is an `OSError`).
    return isinstance(exc, OSError)


_DELIBERATE = (ApplicationError, StaleAttempt, TurnEnded, TurnChanged)
"""Raised on purpose, and settled where they are raised or caught: our own
`ApplicationError`s say themselves whether to retry; a stale attempt stands down; a write
refused because the turn ended or changed is read again."""


def gives_up(exc: BaseException, attempts: int = NON_TRANSIENT_ATTEMPTS) -> bool:
    """Whether this activity attempt, failing with `exc`, is the last it gets: `exc` is not
    transient, not raised on purpose, and the `attempts` for such failures are spent."""
    if isinstance(exc, _DELIBERATE) or is_transient(exc):
        return False
    if isinstance(exc, psycopg.DataError):
        attempts = 1  # Postgres refused the data itself: the same data is refused again
    return activity.info().attempt >= attempts


def non_transient_failure(what: str, exc: BaseException) -> ApplicationError:
    """The non-retryable failure that ends `what` for good: the exception's class (and its
    SQLSTATE) only, since its message may quote content; the traceback goes to the log."""
    state = getattr(exc, "sqlstate", None)
    kind = type(exc).__qualname__ + (f" (SQLSTATE {state})" if isinstance(state, str) else "")
    attempt = activity.info().attempt
    return ApplicationError(
        f"{what} failed {attempt} times with {kind}, which retrying does not fix; "
        "the worker's log has the traceback",
        type=NON_TRANSIENT_FAILURE,
        non_retryable=True,
    )


@contextlib.contextmanager
def bounded_failures(
    what: str, turn_id: str | None = None, *, attempts: int = NON_TRANSIENT_ATTEMPTS
) -> Iterator[None]:
    """Apply the rule to the activity body inside: a transient failure propagates (retried at
    the workflow's policy), another is retried until `attempts`, then becomes a non-retryable
    `ApplicationError`, which ends the turn."""
    try:
        yield
    except Exception as exc:
        if not gives_up(exc, attempts):
            if not isinstance(exc, _DELIBERATE) and not is_transient(exc):
                log.warning(
                    "%s of turn %s failed (attempt %d of %d for a failure that is not transient)",
                    what,
                    turn_id,
                    activity.info().attempt,
                    attempts,
                    exc_info=True,
                )
            raise
        log.error("%s of turn %s failed for good", what, turn_id, exc_info=True)
        raise non_transient_failure(what, exc) from None
