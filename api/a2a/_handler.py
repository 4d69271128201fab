"""A2A's requests on the one front door: `SendMessage` admits a turn
(`think.server.admit_submission`) or answers a paused one (the approval and client-tool paths
the HTTP routes take, `api._answers`), `SendStreamingMessage` and `SubscribeToTask` follow the
turn's stream (`think.server.follow`) mapped chunk by chunk, `GetTask` reads the turn,
`CancelTask` is `think.server.cancel_turn`.

The SDK's own `DefaultRequestHandler` runs the agent in the gateway's process behind an
in-memory queue; that is a second path to the engine, and a task would live on one gateway.
This handler implements the SDK's `RequestHandler` interface over the turns instead, so any
gateway answers for any task and nothing is stored for A2A's sake.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from api import _answers, _turns
from api._budgets import check_budgets
from api._limits import Release
from api.a2a import _input, _tasks
from api.deps import Principal, Resources
from api.errors import Problem
from think.server import (
    ID,
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    DispatchFailed,
    IdempotencyConflict,
    Think,
    ToolDecision,
    ToolResultSubmission,
    TurnRecord,
    UIMessage,
    admit_submission,
    approval_request,
    follow,
    settled,
    turn_view,
    wait_for_answer,
    wait_for_turn,
)

CALL = "think.a2a"
"""Where the route leaves the request's `Call` in the SDK's `ServerCallContext.state`."""
BLOCKING_WAIT = 600.0
"""How long a blocking `SendMessage` waits for its turn to settle (HTTP's wait mode's bound)."""
SETTLE_WAIT = 30.0
"""How long a stream waits, after a turn's last chunk or an approval request, for its status."""


@dataclass(frozen=True)
class Call:
    """Who asks which agent: set by the route once the bearer key and the agent are known."""

    res: Resources
    principal: Principal
    agent: type[Think]
    streams: list[Release] = field(default_factory=list)
    """The tenant's stream slots this request holds (`TenantLimits.open_stream`), which the
    route gives back when its response ends."""

    @property
    def tenant(self) -> str:
        return self.principal.tenant

    async def open_stream(self) -> None:
        """Take one of the tenant's stream slots, as `/v1`'s streams do, before a stream
        admits anything; the route gives it back once the response has ended."""
        try:
            self.streams.append(await self.res.limits.open_stream(self.tenant))
        except Problem as problem:
            raise _refused(problem) from problem


def _call(context: ServerCallContext) -> Call:
    call: Call = context.state[CALL]
    return call


def _refused(problem: Problem) -> InvalidRequestError | TaskNotFoundError:
    """A refusal of the HTTP paths this one shares (limits, budgets, answers), in A2A's
    terms: the same words, as a JSON-RPC error."""
    if problem.status == 404:
        return TaskNotFoundError(message=problem.detail)
    return InvalidRequestError(message=problem.detail)


async def find_turn(call: Call, task_id: str) -> TurnRecord:
    """The caller's turn of this agent that `task_id` names; TaskNotFoundError otherwise, with
    the same words whether it is another tenant's or no one's."""
    turn = await call.res.store.get_turn(task_id) if ID.fullmatch(task_id) else None
    if turn is None or turn.tenant != call.tenant or turn.agent != call.agent.name:
        raise TaskNotFoundError(message=f"no task {task_id!r} for agent {call.agent.name!r}")
    return turn


def _waits_on(turn: TurnRecord) -> frozenset[str]:
    """The approvals and client tool calls the turn waits for, by id."""
    view = turn_view(turn)
    return frozenset(
        [a.approval_id for a in view.pending_approvals]
        + [c.tool_call_id for c in view.pending_client_tools]
    )


class TurnsHandler(RequestHandler):
    """The A2A request handler of every agent: the route names the agent and the caller."""

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        turn = await find_turn(_call(context), params.id)
        length = params.history_length if params.HasField("history_length") else None
        return _tasks.task(turn, length)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(
            message="tasks are not listed: a context's turns are at GET /v1/agents/{agent}/"
            "conversations/{context_id}/turns"
        )

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        call = _call(context)
        turn = await find_turn(call, params.id)
        if not await _turns.cancel(call.res, turn, "cancelled by an A2A client"):
            raise TaskNotCancelableError(
                message=f"task {params.id!r} has already ended ({turn.status})"
            )
        ended = await wait_for_turn(
            call.res.store,
            call.res.listener,
            turn.id,
            SETTLE_WAIT,
            until=lambda t: t.status in TERMINAL_STATUSES,
        )
        return _tasks.task(ended)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        call = _call(context)
        length = (
            params.configuration.history_length
            if params.configuration.HasField("history_length")
            else None
        )
        if params.message.task_id:
            turn, answered = await self._answer(call, params.message)
            # Until the turn has applied the answer and settled again: a worker may take a
            # moment to pick the answer up, and the turn shows it waiting meanwhile.
            went_on = await wait_for_turn(
                call.res.store,
                call.res.listener,
                turn.id,
                BLOCKING_WAIT,
                until=lambda t: settled(t) and not answered & _waits_on(t),
            )
            return _tasks.task(went_on, length)
        admission = await self._admit(call, params.message)
        if params.configuration.return_immediately:
            return _tasks.task(admission.turn, length)
        waited = await wait_for_answer(
            call.res.store,
            call.res.listener,
            admission.turn.id,
            BLOCKING_WAIT,
            queued=not admission.runs_now,
        )
        return _tasks.task(waited.turn, length)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        call = _call(context)
        await call.open_stream()
        if params.message.task_id:
            turn, answered = await self._answer(call, params.message)
            yield _tasks.task(turn)
            async for event in _events(call, turn, skip=answered):
                yield event
            return
        admission = await self._admit(call, params.message)
        turn = admission.turn
        yield _tasks.task(turn)
        async for event in _events(call, turn):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        call = _call(context)
        turn = await find_turn(call, params.id)
        if turn.status in TERMINAL_STATUSES:
            raise UnsupportedOperationError(
                message=f"task {params.id!r} has ended ({turn.status}): read it with GetTask"
            )
        await call.open_stream()
        # The task as it stands, then its stream from the start: the answer's artifact comes
        # again from its first piece (`append: false` replaces what the client held).
        snapshot = _tasks.task(turn)
        del snapshot.artifacts[:]
        yield snapshot
        async for event in _events(call, turn):
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError

    async def _admit(self, call: Call, message: Message) -> Admission:
        """Admit the message as a turn, as HTTP's submission route does (budgets, the
        submission limit, then `admit_submission`): in the context it names, which must be
        the caller's conversation with this agent, or in a new one."""
        if not message.message_id:
            raise InvalidParamsError(message="the message needs a messageId")
        text = _input.input_text(message)
        res, agent = call.res, call.agent
        if message.context_id:
            known = (
                await res.store.get_conversation(
                    tenant=call.tenant, agent=agent.name, conversation_id=message.context_id
                )
                if ID.fullmatch(message.context_id)
                else None
            )
            if known is None:
                raise InvalidParamsError(
                    message=f"no context {message.context_id!r} for agent {agent.name!r}: "
                    "leave contextId out to start one"
                )
            conversation_id = known.id
        else:
            conversation_id = _input.new_context_id(call.tenant, agent.name, message.message_id)
        try:
            await check_budgets(res.budgets, res.store, call.tenant)
            await res.limits.take_submission(call.tenant)
            return await admit_submission(
                res.store,
                res.temporal,
                res.settings.task_queue,
                agent,
                tenant=call.tenant,
                conversation_id=conversation_id,
                messages=[UIMessage.user_text(text)],
                input=text,
                idempotency_key=_input.idempotency_key(message.message_id),
                submitted_by=call.principal.key_name,
            )
        except Problem as problem:
            raise _refused(problem) from problem
        except IdempotencyConflict as conflict:
            raise InvalidParamsError(
                message=f"message {message.message_id!r} was sent before with other content: "
                "give a new message a new messageId"
            ) from conflict
        except DispatchFailed as exc:
            raise InvalidRequestError(
                message=f"{exc}; the turn is recorded: resend the message with its messageId"
            ) from exc

    async def _answer(self, call: Call, message: Message) -> tuple[TurnRecord, frozenset[str]]:
        """Answer the paused task the message names: the turn as it stands after, and what
        the answer answered (approval ids, whose requests a stream of the rest starts after;
        or a client tool call's id)."""
        turn = await find_turn(call, message.task_id)
        if message.context_id and message.context_id != turn.conversation_id:
            raise TaskNotFoundError(
                message=f"no task {message.task_id!r} in context {message.context_id!r}"
            )
        if turn.status not in PAUSED_STATUSES:
            raise UnsupportedOperationError(
                message=f"task {message.task_id!r} is {_tasks.STATES[turn.status]!r} and takes "
                "no input: send a new message in its context (contextId, no taskId)"
            )
        given = _input.answer(message)
        try:
            if isinstance(given, _input.ToolResult):
                result = ToolResultSubmission(
                    tool_call_id=given.tool_call_id, output=given.output, error=given.error
                )
                current, _ = await _answers.answer_client_tool(call.res, turn, result)
                return current, frozenset({given.tool_call_id})
            return await self._decide(call, turn, given)
        except Problem as problem:
            raise _refused(problem) from problem

    async def _decide(
        self, call: Call, turn: TurnRecord, given: _input.Decision
    ) -> tuple[TurnRecord, frozenset[str]]:
        agent, principal = call.agent, call.principal
        if agent.approvers is not None and principal.key_name not in agent.approvers:
            raise InvalidRequestError(
                message=f"this key may not decide {agent.name!r}'s approvals: the agent "
                "restricts them to its approvers' keys (Think.approvers)"
            )
        pending = [p.approval_id for p in turn_view(turn).pending_approvals]
        if given.approval_id is not None:
            if approval_request(turn, given.approval_id) is None:
                raise InvalidParamsError(message=f"no approval {given.approval_id!r} is pending")
            pending = [given.approval_id]
        current = turn
        for approval_id in pending:
            decision = ToolDecision(
                approval_id=approval_id,
                approved=given.approved,
                reason=given.reason,
                by="a2a",
                principal=principal.label,
            )
            # A resent answer finds it decided already: the task goes on as it stands.
            with contextlib.suppress(Problem):
                current, _ = await _answers.answer_approval(call.res, current, decision)
        return current, frozenset(pending)


async def _events(
    call: Call, turn: TurnRecord, skip: frozenset[str] = frozenset()
) -> AsyncGenerator[Event]:
    """The turn's stream as A2A events, from its start: `working` once it runs, each piece of
    the answer's text as an artifact update, then the status it settles in. A turn that pauses
    for a person ends the stream as `input-required` (its answer streams the rest). `skip`:
    the approvals and client tool calls this request answered, whose requests (and what came
    before) were streamed already."""
    store, listener = call.res.store, call.res.listener
    waiting_for = set(skip)
    first_text = not (turn.message and _tasks.text_parts(turn.message["parts"]))
    working = False
    async with contextlib.aclosing(follow(store, listener, turn.id)) as chunks:
        async for _, chunk in chunks:
            # Read as a mapping: the chunk union's `data-*` member is keyed by any string,
            # which keeps a type checker from narrowing on `type` alone.
            fields: Mapping[str, object] = chunk
            kind, delta = chunk["type"], fields.get("delta")
            if waiting_for:
                if kind == "tool-approval-request":
                    waiting_for.discard(str(fields.get("approvalId")))
                elif kind == "tool-input-available":  # a client tool's call
                    waiting_for.discard(str(fields.get("toolCallId")))
                continue
            if not working and kind in ("start", "start-step", "text-delta"):
                working = True
                yield _working(turn)
            if kind == "text-delta" and isinstance(delta, str) and delta:
                yield _tasks.text_event(turn, delta, first=first_text)
                first_text = False
            elif kind == "tool-approval-request":
                paused = await wait_for_turn(store, listener, turn.id, SETTLE_WAIT, until=settled)
                if paused.status in PAUSED_STATUSES:
                    yield _tasks.status_event(paused)
                    return
            elif kind in ("finish", "error", "abort"):
                break
    ended = await wait_for_turn(
        store, listener, turn.id, SETTLE_WAIT, until=lambda t: t.status in TERMINAL_STATUSES
    )
    yield _tasks.status_event(ended)


def _working(turn: TurnRecord) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=_tasks.task_id(turn),
        context_id=turn.conversation_id,
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )
