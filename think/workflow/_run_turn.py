"""`run_turn`: a Think turn from a user's own workflow code, as a child workflow
(`think.RunTurn`, `think.workflows._run_turn`), and the `TurnResult` it returns.

This module runs inside the workflow sandbox, in the caller's workflow task: it reads only
`workflow.info()` and its own call count, and imports nothing that does I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError

from think._messages import UIMessage
from think.exceptions import NON_RETRYABLE_USER_ERROR, OUTPUT_VALIDATION_ERROR
from think.workflows.inputs import RunTurnInput, RunTurnOutcome
from think.workflows.names import DEFAULT_TENANT, RUN_TURN_WORKFLOW

if TYPE_CHECKING:
    from think.agent import Think

OutputT = TypeVar("OutputT", bound=BaseModel)

TurnEnding = Literal["completed", "error", "aborted", "interrupted", "skipped"]
"""How a turn ended (the terminal statuses of `think.TurnResult`)."""

_CALLS = "_think_run_turn_calls"
"""The attribute of the calling workflow's instance that counts its `run_turn` calls: on the
instance, so that a replay (which builds a new one) counts from the start again."""

MessageJSON = UIMessage | Mapping[str, Any]
TurnInputLike = str | MessageJSON | Sequence[MessageJSON]


class TurnResult(BaseModel, Generic[OutputT]):
    """How a turn run by `run_turn` ended: never an exception for a turn that ran and failed.

    `status` is `completed`, `error` (the model or a hook failed: `error` says why),
    `aborted` (cancelled by someone else: an HTTP cancel, an interrupting submission; the
    partial answer is kept), `interrupted` (model recovery spent) or `skipped` (the agent's
    `message_concurrency` dropped or merged it; `answered_by` names the turn that answered a
    merged one). `output` is the answer parsed into `output_type`, for a completed turn.
    """

    model_config = ConfigDict(frozen=True)

    turn_id: str
    status: TurnEnding
    message: UIMessage | None = None
    """The assistant message (None when the turn produced none)."""
    text: str = ""
    """The text of the answer's last step: the final answer."""
    output: OutputT | None = None
    error: str | None = None
    answered_by: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    """What the turn spent, as HTTP's `Turn.usage`: tokens by kind, `cost`, `models`, `steps`."""
    accepted: bool = True
    """False when the key named a turn admitted before (an explicit `idempotency_key` used
    again): this call waited for that turn instead of submitting another."""

    @property
    def ok(self) -> bool:
        return self.status == "completed"


@overload
async def run_turn(
    agent: str | type[Think],
    conversation_id: str,
    input: TurnInputLike,
    *,
    output_type: None = None,
    tenant: str = DEFAULT_TENANT,
    idempotency_key: str | None = None,
    body: dict[str, Any] | None = None,
    concurrency: str | None = None,
    task_queue: str | None = None,
) -> TurnResult[Any]: ...


@overload
async def run_turn(
    agent: str | type[Think],
    conversation_id: str,
    input: TurnInputLike,
    *,
    output_type: type[OutputT],
    tenant: str = DEFAULT_TENANT,
    idempotency_key: str | None = None,
    body: dict[str, Any] | None = None,
    concurrency: str | None = None,
    task_queue: str | None = None,
) -> TurnResult[OutputT]: ...


async def run_turn(
    agent: str | type[Think],
    conversation_id: str,
    input: TurnInputLike,
    *,
    output_type: type[BaseModel] | None = None,
    tenant: str = DEFAULT_TENANT,
    idempotency_key: str | None = None,
    body: dict[str, Any] | None = None,
    concurrency: str | None = None,
    task_queue: str | None = None,
) -> TurnResult[Any]:
    """Run one turn of `agent`'s conversation `conversation_id` and return how it ended.
    Workflow code only: call it from a `@workflow.run` method (or a handler) of yours.

    `input` is what HTTP's `input` takes: a string, a UIMessage (or its JSON) or a list of
    them. `output_type`, a pydantic model, makes the answer structured: the turn asks the
    model for its JSON Schema (unless the agent's `before_turn` names another output) and
    `result.output` is an instance of it. `body` reaches `before_turn` as `ctx.body`;
    `concurrency` overrides the agent's `message_concurrency` for this submission.

    Admitted once: the idempotency key is `idempotency_key`, or else made of this workflow
    run's id and the call's number in it, so a replay or a retry after a crash finds the turn
    it admitted before. `task_queue` is Think's (default: this workflow's own, when Think's
    worker hosts it).

    Returns a `TurnResult` whatever the turn's ending. Raises `ApplicationError` (type
    `ThinkUserError`) when the turn cannot be admitted: an unknown agent, a bad id or input,
    the key reused for another request; `ApplicationError` (type `ThinkOutputValidationError`)
    when the output does not fit `output_type`. Cancelling the call (cancelling this workflow,
    or the task awaiting it) cancels the turn, waits until it has stored its partial answer,
    and raises `asyncio.CancelledError`.
    """
    name = agent if isinstance(agent, str) else agent.name
    info = workflow.info()
    number = _next_call()
    child_id = f"think-turn:{info.run_id}:{number}"
    schema = output_type.model_json_schema() if output_type is not None else None
    request = RunTurnInput(
        agent=name,
        conversation_id=conversation_id,
        tenant=tenant,
        input=_input_json(input),
        idempotency_key=idempotency_key or child_id,
        body=body,
        concurrency=concurrency,
        output_schema=schema,
        caller=info.workflow_id,
    )
    try:
        outcome = await workflow.execute_child_workflow(
            RUN_TURN_WORKFLOW,
            request,
            id=child_id,
            task_queue=task_queue or info.task_queue,
            result_type=RunTurnOutcome,
            # The caller ends (terminated, timed out) without the answer: cancel the turn too.
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"Think turn of {name}/{conversation_id}",
        )
    except ChildWorkflowError as exc:
        error = _caller_error(exc, name, conversation_id)
        if error is exc:
            raise
        raise error from exc
    output: BaseModel | None = None
    if output_type is not None and outcome.status == "completed" and outcome.output is not None:
        try:
            output = output_type.model_validate(outcome.output)
        except ValidationError as exc:
            raise ApplicationError(
                f"the output of turn {outcome.turn_id} does not fit "
                f"{output_type.__qualname__}: {exc}",
                type=OUTPUT_VALIDATION_ERROR,
                non_retryable=True,
            ) from exc
    return TurnResult[Any](
        turn_id=outcome.turn_id,
        status=_ending(outcome.status),
        message=UIMessage.model_validate(outcome.message) if outcome.message else None,
        text=outcome.text,
        output=output if output_type is not None else outcome.output,
        error=outcome.error,
        answered_by=outcome.answered_by,
        usage=outcome.usage,
        accepted=outcome.accepted,
    )


def _next_call() -> int:
    instance = workflow.instance()
    number = int(getattr(instance, _CALLS, 0)) + 1
    try:
        setattr(instance, _CALLS, number)
    except AttributeError as exc:  # a class with __slots__
        raise ApplicationError(
            f"run_turn counts its calls on the workflow's instance, and "
            f"{type(instance).__qualname__} takes no new attribute (__slots__?): "
            f"add {_CALLS!r} to its slots",
            type=NON_RETRYABLE_USER_ERROR,
            non_retryable=True,
        ) from exc
    return number


def _input_json(value: TurnInputLike) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, UIMessage):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return dict(value)
    return [_input_json(item) for item in value]


def _ending(status: str) -> TurnEnding:
    endings: tuple[TurnEnding, ...] = ("completed", "error", "aborted", "interrupted", "skipped")
    for ending in endings:
        if status == ending:
            return ending
    raise ApplicationError(f"turn ended with an unknown status {status!r}")


def _caller_error(exc: ChildWorkflowError, agent: str, conversation_id: str) -> BaseException:
    """What the caller sees of a `think.RunTurn` that did not answer: its cancel as the
    asyncio cancel it is, its admission's refusal as an `ApplicationError` of the same type."""
    if isinstance(exc.cause, CancelledError):
        return asyncio.CancelledError(f"the turn of {agent}/{conversation_id} was cancelled")
    cause: BaseException | None = exc.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__  # an activity's failure: ActivityError, then its cause
    if isinstance(cause, ApplicationError):
        return ApplicationError(
            cause.message, *cause.details, type=cause.type, non_retryable=cause.non_retryable
        )
    return exc
