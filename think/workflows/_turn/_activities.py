"""How the turn's workflows call their activities: timeouts, retry policies, and the short
database step that most of them are."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

ResultT = TypeVar("ResultT")

TRANSIENT_BUDGET = timedelta(hours=1)
"""How long an activity keeps retrying transient failures (Postgres or Temporal down, a lost
connection: `think.storage.is_transient`) before the turn gives up on it: an outage shorter
than this loses nothing. Every other failure is tried `think.storage.NON_TRANSIENT_ATTEMPTS`
times (the activity decides, `bounded_failures`), then ends the turn `error`."""

DB_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    # At the 5 s ceiling: 720 attempts are the budget, plus the first few, shorter ones.
    maximum_attempts=int(TRANSIENT_BUDGET / timedelta(seconds=5)) + 10,
)
# The step itself bounds model failures (the agent's `chat_recovery`, ending the turn as
# `interrupted`) and other failures that are not transient (`bounded_failures`); what reaches
# this policy beyond that are infrastructure failures (Postgres or a worker down), retried
# until they recover, for up to `TRANSIENT_BUDGET`.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=int(TRANSIENT_BUDGET / timedelta(seconds=10)) + 10,
)
STEP_TIMEOUT = timedelta(minutes=10)
LOCAL_TIMEOUT = timedelta(seconds=30)
CHILD_CHECK = timedelta(seconds=10)
"""How often a turn waiting for a sub-agent's turn looks at it in Postgres, in case its
`child_turn_ended` Signal never comes (a child cancelled before it started has no workflow to
send one), and to apply the agent tool's timeout."""
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    # Postgres outages for up to `TRANSIENT_BUDGET`; the summarising model's retryable
    # failures are given up on sooner by the activity (`COMPACT_MODEL_ATTEMPTS`).
    maximum_attempts=int(TRANSIENT_BUDGET / timedelta(seconds=30)) + 10,
)


async def database_step(
    activity: str, arg: Any, *, result_type: type[ResultT], summary: str
) -> ResultT:
    """Run a short database transaction of the turn as a local activity: a marker in this
    workflow task's history rather than a round trip through the server, retried while
    Postgres is down (for up to `TRANSIENT_BUDGET`)."""
    result: ResultT = await workflow.execute_local_activity(
        activity,
        arg,
        result_type=result_type,
        start_to_close_timeout=LOCAL_TIMEOUT,
        retry_policy=DB_RETRY,
        summary=summary,
    )
    return result
