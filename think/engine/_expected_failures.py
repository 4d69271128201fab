"""Expected control flow said in one line, not as a crash.

Temporal's worker logs every failed activity attempt ("Completing activity as failed") and
every failed workflow task ("Failed activation on workflow …") with the exception's
traceback. Some of those failures are the framework working as designed: an attempt that a
newer one superseded stands down (`StaleAttempt`, `Superseded`), a write refused because the
turn ended meanwhile (`TurnEnded`), a model failure that the step retries, Postgres or
Temporal not answering when a process starts (`ServiceUnreachable`). For those the
traceback (up to 90 lines for one superseded turn) says nothing an operator can act on and
buries the real crashes, so this filter rewrites such a record as one line naming the cause;
anything else keeps its traceback.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from think.exceptions import MODEL_RETRY, STALE_ATTEMPT, ServiceUnreachable, Superseded
from think.streaming import StaleAttempt, TurnEnded

_EXPECTED_TYPES = frozenset({STALE_ATTEMPT, MODEL_RETRY})
"""Our `ApplicationError` types that are control flow, not failures."""

_SDK_LOGGERS = ("temporalio.activity", "temporalio.worker._workflow_instance")
"""Where the SDK logs a failed activity attempt and a failed workflow task."""


def expected_cause(exc: BaseException | None) -> str | None:
    """What an expected failure was, in a few words; None for anything else. The exception's
    causes are followed, since the SDK wraps them."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ServiceUnreachable):
            return str(exc)
        if isinstance(exc, Superseded):
            return f"superseded, a newer attempt runs elsewhere: {exc}"
        if isinstance(exc, StaleAttempt):
            return f"stale attempt, a newer attempt took over: {exc}"
        if isinstance(exc, TurnEnded):
            return f"the turn ended meanwhile: {exc}"
        if isinstance(exc, ApplicationError) and (
            exc.type in _EXPECTED_TYPES or exc.category == ApplicationErrorCategory.BENIGN
        ):
            return f"{exc.type or 'expected'}: {exc.message}"
        exc = exc.__cause__
        seen += 1
    return None


_FORMATTED = f"{ServiceUnreachable.__module__}.{ServiceUnreachable.__qualname__}: "


def _formatted_cause(record: logging.LogRecord) -> str | None:
    """Starlette hands uvicorn a failed start as the traceback's text (the lifespan's
    `startup.failed` message), not as an exception: its last line names ours."""
    if record.exc_info or not isinstance(record.msg, str) or _FORMATTED not in record.msg:
        return None
    last = record.msg.rstrip().rsplit("\n", 1)[-1]
    return last.removeprefix(_FORMATTED) if last.startswith(_FORMATTED) else None


class ExpectedFailures(logging.Filter):
    """Rewrites a record whose exception is expected control flow as one INFO line with its
    cause (and no traceback); leaves every other record as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        cause = expected_cause(exc) or _formatted_cause(record)
        if cause is None:
            return True
        record.msg = f"{record.getMessage()}: {cause}" if exc is not None else cause
        record.args = None
        record.exc_info = None
        record.exc_text = None
        if record.levelno > logging.INFO:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_expected_failures(*more: str) -> None:
    """Install the filter on the SDK's loggers, and on the loggers named in `more` (once per
    process)."""
    for name in (*_SDK_LOGGERS, *more):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ExpectedFailures) for f in logger.filters):
            logger.addFilter(ExpectedFailures())
