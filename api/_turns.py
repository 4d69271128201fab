"""The logic behind the turn routes: admission, waiting and cancelling (the one front door,
shared with the Python turn API: `think.server.admit_submission`), the `Turn` view (a
selection of `think.server.turn_view`) and the answer of a route that admits a turn.

Admission is two steps: a Postgres transaction (which decides idempotency and the order of
the conversation's turns, and outlives Temporal's retention), then the start of the turn's
workflow when it is the conversation's turn to run. Both routes that admit a turn (a
submission, a regenerate) go through `submit` or `regenerate` here, which check the tenant's
daily budgets (`api._budgets`) and spend its limits first and answer with `_admitted`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from fastapi.types import DecoratedCallable

from api._budgets import check_budgets
from api._limits import Release
from api._openapi import described
from api._sse import stream_response
from api.deps import Resources
from api.errors import Problem
from api.schemas import QueuedBehind, RegenerateBody, SubmitTurnBody, TurnOut
from think import server
from think.server import (
    Admission,
    Conversation,
    DispatchFailed,
    Think,
    TurnRecord,
    public_turn_id,
    public_turn_id_or_none,
)

log = logging.getLogger("think.api.turns")

__all__ = [
    "admission_route",
    "base_url",
    "cancel",
    "chat_stream",
    "regenerate",
    "submit",
    "turn_out",
]

DEFAULT_WAIT = 600.0
"""A wait-mode request's bound without `wait_timeout` (API.md)."""
SHOWN_AS_VIEWED = frozenset(TurnOut.model_fields) - {"message"}
"""The fields of `Turn` that are the turn view's as they are; `message` is shown only when
the turn has settled or the request waited for it."""


def admission_route(
    router: APIRouter, path: str, refusals: Mapping[int, str]
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """Declare a route that admits a turn (`submit`, `regenerate`) as `_admitted` answers:
    202 for a new turn, 200 for a repeat or in wait and stream mode; and `refusals`, the
    route's own statuses."""
    return router.post(
        path,
        status_code=202,
        response_model=TurnOut,
        responses={
            200: {"description": "A repeat of a known Idempotency-Key, or wait/stream mode"},
            **described(refusals),
        },
    )


async def submit(
    res: Resources,
    agent: type[Think],
    body: SubmitTurnBody,
    *,
    tenant: str,
    conversation_id: str,
    idempotency_key: str | None,
    submitted_by: str | None = None,
    chat: bool = False,
) -> Response:
    """Admit a submission (creating the conversation if needed) and answer for it;
    `submitted_by` names the API key that sent it (`TurnRequest.submitted_by`); `chat`: for
    the AI SDK's chat transports (`chat_stream`)."""
    await check_budgets(res.budgets, res.store, tenant)
    async with _limited(res, tenant, body.mode) as release:
        try:
            admission = await server.admit_submission(
                res.store,
                res.temporal,
                res.settings.task_queue,
                agent,
                tenant=tenant,
                conversation_id=conversation_id,
                messages=body.messages(),
                input=body.input_json(),
                parent_id=body.parent_id,
                body=body.body,
                client_tools=[t.model_dump() for t in body.client_tools],
                concurrency=body.concurrency,
                submission_id=body.submission_id,
                idempotency_key=idempotency_key,
                awaited=body.mode == "wait",
                submitted_by=submitted_by,
            )
        except DispatchFailed as exc:
            raise _unavailable(exc) from exc
        return await _admitted(res, admission, body.mode, body.wait_timeout, release, chat=chat)


async def regenerate(
    res: Resources,
    agent: type[Think],
    conv: Conversation,
    body: RegenerateBody,
    *,
    tenant: str,
    idempotency_key: str | None,
    chat: bool = False,
) -> Response:
    """Admit a regenerate of `body.message_id`'s answer, start it as admission starts any
    submission (`server.dispatch`), and answer for it (`chat`: as `submit`'s)."""
    await check_budgets(res.budgets, res.store, tenant)
    async with _limited(res, tenant, body.mode) as release:
        admission = await res.store.regenerate(
            tenant=tenant,
            agent=agent.name,
            conversation_id=conv.id,
            message_id=body.message_id,
            idempotency_key=idempotency_key,
            body=body.body,
            priority=agent.priority,
        )
        try:
            await server.dispatch(res.store, res.temporal, res.settings.task_queue, admission)
        except DispatchFailed as exc:
            raise _unavailable(exc) from exc
        return await _admitted(res, admission, body.mode, body.wait_timeout, release, chat=chat)


def chat_stream(
    res: Resources, turn: TurnRecord, after: int, release: Release, live_since: float | None
) -> Response:
    """A turn's stream as the AI SDK's chat transports read it: with the turn's id in
    `x-workflow-run-id` (`WorkflowChatTransport` resumes by it), and ended at a pause for an
    approval or a client tool, which useChat answers with its next request."""
    return stream_response(
        res,
        turn.id,
        after,
        release,
        live_since,
        end_at_pause=True,
        headers={"x-workflow-run-id": public_turn_id(turn.id)},
    )


def _unavailable(exc: DispatchFailed) -> Problem:
    return Problem(
        503,
        f"{exc}; the turn is recorded: retry the request with the same Idempotency-Key",
        turn_id=public_turn_id_or_none(exc.turn_id),
    )


def base_url(res: Resources) -> str:
    """What the URLs a `Turn` carries start with: THINK_PUBLIC_URL, or nothing (a path).

    Not `request.base_url`: that is the Host header, which the client chooses, so a forged
    Host would have put another site into the URLs a gateway hands out (and a cache could
    keep them for everyone)."""
    return res.settings.public_url or ""


def _turn_url(turn: TurnRecord, base: str) -> str:
    turn_id = public_turn_id(turn.id)
    return f"{base}/v1/agents/{turn.agent}/conversations/{turn.conversation_id}/turns/{turn_id}"


def turn_out(
    turn: TurnRecord,
    *,
    base: str,
    accepted: bool = True,
    with_message: bool = False,
    queued_behind: TurnRecord | None = None,
) -> TurnOut:
    """HTTP's `Turn`: the shared turn view, with the message only in wait mode or once the
    turn has settled, and the URLs to follow it. By default as a read shows it: `accepted`
    is about the call that admitted the turn, which a read is not."""
    view = server.turn_view(turn, accepted=accepted)
    url = _turn_url(turn, base)
    shown = {name: value for name, value in view if name in SHOWN_AS_VIEWED}
    return TurnOut(
        **shown,
        message=view.message if with_message or server.settled(turn) else None,
        queued_behind=None
        if queued_behind is None
        else QueuedBehind(
            turn_id=public_turn_id(queued_behind.id),
            status=queued_behind.status,
            status_url=_turn_url(queued_behind, base),
        ),
        stream_url=f"{url}/stream",
        status_url=url,
        workflow_id=server.turn_workflow_id(
            turn.agent, turn.conversation_id, turn.id, tenant=turn.tenant
        ),
    )


async def _admitted(
    res: Resources,
    admission: Admission,
    mode: Literal["submit", "wait", "stream"],
    wait_timeout: float | None,
    release: Release | None,
    *,
    chat: bool = False,
) -> Response:
    """The answer of a route that admitted a turn: the stream (which owns the stream slot
    `release` gives back), the turn once it settles (wait), or the record (202 new, 200 a
    repeat)."""
    turn = admission.turn
    if mode == "stream":
        assert release is not None, "a stream's slot is taken before its turn is admitted"
        # A new turn's chunks are all live, however soon its worker wrote them.
        since = turn.created_at.timestamp() if admission.accepted else None
        if chat:
            return chat_stream(res, turn, -1, release, since)
        return stream_response(res, turn.id, -1, release, since)
    status = 202 if admission.accepted else 200
    queued_behind = None
    if mode == "wait":
        # Until it settles, or at once when a turn ahead, paused for a person, holds it.
        waited = await server.wait_for_answer(
            res.store,
            res.listener,
            turn.id,
            wait_timeout or DEFAULT_WAIT,
            queued=not admission.runs_now,
        )
        turn, queued_behind = waited.turn, waited.queued_behind
        status = 200
    out = turn_out(
        turn,
        base=base_url(res),
        accepted=admission.accepted,
        with_message=mode == "wait",
        queued_behind=queued_behind,
    )
    return JSONResponse(out.model_dump(mode="json"), status_code=status)


async def cancel(res: Resources, turn: TurnRecord, reason: str) -> bool:
    """Cancel a turn; False when it had already ended (nothing changes then)."""
    return await server.cancel_turn(res.store, res.temporal, res.settings.task_queue, turn, reason)


@asynccontextmanager
async def _limited(res: Resources, tenant: str, mode: str) -> AsyncIterator[Release | None]:
    """Around admitting a turn: spend one of the tenant's submissions first, and for stream
    mode take one of its stream slots (yielded, for `_admitted`), so a refusal admits
    nothing; should the admission or its answer fail, the slot is given back."""
    release = await res.limits.open_stream(tenant) if mode == "stream" else None
    try:
        await res.limits.take_submission(tenant)
        yield release
    except BaseException:
        if release is not None:
            await release()
        raise
