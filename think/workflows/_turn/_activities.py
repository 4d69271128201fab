"""How the turn's workflows call their activities: timeouts, retry policies, and the short
database step that most of them are."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

ResultT = TypeVar("ResultT")

DB_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5)
)
# The step itself bounds model failures (the agent's `chat_recovery`, ending the turn as
# `interrupted`); what reaches this policy beyond that are infrastructure failures (Postgres or
# a worker down), which are retried until they recover.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
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
    maximum_attempts=5,
)


async def database_step(
    activity: str, arg: Any, *, result_type: type[ResultT], summary: str
) -> ResultT:
    """Run a short database transaction of the turn as a local activity: a marker in this
    workflow task's history rather than a round trip through the server, retried while
    Postgres is down."""
    result: ResultT = await workflow.execute_local_activity(
        activity,
        arg,
        result_type=result_type,
        start_to_close_timeout=LOCAL_TIMEOUT,
        retry_policy=DB_RETRY,
        summary=summary,
    )
    return result
