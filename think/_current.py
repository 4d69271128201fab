"""The turn an activity serves, bound for its hooks and tools.

A worker interceptor (`BindTurns`) binds every activity whose input names a `turn_id` (model
step, tool call, commit, `on_chat_response`) to that turn, in a contextvar, for the activity's
duration. Nothing is read until something asks, so the hot path pays nothing. The turn API
uses it twice: `current_conversation()` (and `ctx.conversation()`, `self.run_turn(...)` on the
agent) find their conversation through it, and the deadlock guard refuses a blocking call for
the conversation whose turn is bound and still running.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from think.exceptions import UserError
from think.storage import TurnRecord, stash_recovery_data

if TYPE_CHECKING:
    from think.turns import ConversationHandle, ThinkService


BOUND: ContextVar[_Binding | None] = ContextVar("think_bound_turn", default=None)
WORKER_SERVICE: ContextVar[ThinkService | None] = ContextVar("think_worker_service", default=None)
"""The worker's service, set for every activity (a turn's or not: a scheduled task's handler),
for what posts on the worker's connections outside a turn (`Think.deliver_notice`)."""


@dataclass
class _Binding:
    """The turn an activity serves, and the worker's service, for hooks and tools."""

    service: ThinkService
    turn_id: str
    _turn: TurnRecord | None = field(default=None, repr=False)

    async def turn(self, *, fresh: bool = False) -> TurnRecord:
        if self._turn is None or fresh:
            found = await self.service.store.get_turn(self.turn_id)
            if found is None:
                raise UserError(f"turn {self.turn_id!r} does not exist")
            self._turn = found
        return self._turn


async def current_conversation() -> ConversationHandle:
    """The conversation of the turn being served: for hooks and tools on a worker.

    Only `mode="submit"` (`submit_messages`) and `add_messages` may be used on it while the
    turn runs: a blocking call would wait for a turn that can only start once this one ends,
    and raises `UserError` instead.
    """
    binding = BOUND.get()
    if binding is None:
        raise UserError(
            "current_conversation() works only inside a turn, in a hook or tool on a worker; "
            "elsewhere use ThinkService.conversation(agent, conversation_id)"
        )
    turn = await binding.turn()
    return binding.service.conversation(turn.agent, turn.conversation_id, tenant=turn.tenant)


def bound_service() -> ThinkService | None:
    """The worker's service inside any of its activities (None elsewhere)."""
    binding = BOUND.get()
    return WORKER_SERVICE.get() if binding is None else binding.service


async def bound_turn_record() -> TurnRecord | None:
    """The record of the turn being served, None outside a turn (what
    `get_messenger_context()` reads its origin from)."""
    binding = BOUND.get()
    return None if binding is None else await binding.turn()


async def stash_value(value: Any) -> None:
    """`Think.stash`: keep `value` as the bound turn's recovery data (one `UPDATE` of its
    row, nothing else), for `on_chat_recovery`'s `ctx.data`. A turn that has ended keeps
    none: nothing will recover it."""
    binding = BOUND.get()
    if binding is None:
        raise UserError(
            "stash() works only inside a turn, in a hook or tool on a worker: it keeps a value "
            "for that turn's on_chat_recovery"
        )
    async with binding.service.store.db.connection() as conn:
        await stash_recovery_data(conn, binding.turn_id, to_jsonable_python(value))


class BindTurns(Interceptor):
    """Worker interceptor: every activity of a turn (its input has a `turn_id`) runs with the
    turn bound, so its hooks and tools reach their conversation and the deadlock guard knows
    which conversation's turn is running. Costs nothing until something asks."""

    def __init__(self, service: ThinkService) -> None:
        self.service = service

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _BindTurn(next, self.service)


class _BindTurn(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, service: ThinkService) -> None:
        super().__init__(next)
        self._service = service

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        turn_id = getattr(input.args[0], "turn_id", None) if input.args else None
        if not isinstance(turn_id, str):
            token = WORKER_SERVICE.set(self._service)
            try:
                return await super().execute_activity(input)
            finally:
                WORKER_SERVICE.reset(token)
        with bound_turn(self._service, turn_id):
            return await super().execute_activity(input)


@contextmanager
def bound_turn(service: ThinkService, turn_id: str) -> Iterator[None]:
    """Bind `turn_id` for what runs inside: an activity of the turn (`BindTurns`), or its
    first step's work done beside its workflow's start (`think.engine.activities.EarlySteps`),
    whose hooks must reach their conversation as they would in the activity."""
    binding = _Binding(service, turn_id)
    token = BOUND.set(binding)
    try:
        yield
    finally:
        BOUND.reset(token)
        # A task or callback begun inside keeps a copy of the context, and with it this
        # binding: it must not keep the turn's record too, whose draft message may hold a
        # tool call's whole input (14 MiB for a large `write`).
        binding._turn = None
