from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Response

from api.deps import AgentClass, ConversationId, ExistingConversation, Res, Tenant
from api.errors import Problem
from api.schemas import (
    EXTENSION,
    ConversationOut,
    ConversationsOut,
    CreateConversation,
    ForkConversation,
    ListedConversationOut,
    MessagesOut,
)
from think.server import (
    ConversationNotFound,
    ConversationStillActive,
    ForkPointNotFound,
    ForkTargetExists,
    clear_conversation,
    delete_conversation,
    fork_conversation,
    new_id,
)

router = APIRouter(tags=["conversations"])

CONVERSATIONS = "/v1/agents/{agent}/conversations"


@router.post(
    CONVERSATIONS,
    response_model=ConversationOut,
    status_code=201,
    responses={200: {"model": ConversationOut, "description": "It already existed"}},
)
async def create_conversation(
    res: Res,
    tenant: Tenant,
    agent: AgentClass,
    response: Response,
    body: Annotated[CreateConversation | None, Body()] = None,
) -> ConversationOut:
    body = body or CreateConversation()
    conv, created = await res.store.create_conversation(
        tenant=tenant,
        agent=agent.name,
        conversation_id=body.id or new_id("conv"),
        metadata=body.metadata,
    )
    response.status_code = 201 if created else 200
    return ConversationOut.model_validate(conv)


@router.get(CONVERSATIONS, response_model=ConversationsOut, openapi_extra=EXTENSION)
async def list_conversations(
    res: Res,
    tenant: Tenant,
    agent: AgentClass,
    limit: Annotated[int, Query(ge=1, le=200, description="At most this many")] = 50,
) -> ConversationsOut:
    """The caller's conversations with this agent, newest first: what the chat page lists.
    Not in API.md's v1 table (an addition, as the contract allows)."""
    found = await res.store.list_conversations(tenant=tenant, agent=agent.name, limit=limit)
    return ConversationsOut(conversations=[ListedConversationOut.model_validate(c) for c in found])


@router.get(f"{CONVERSATIONS}/{{cid}}", response_model=ConversationOut)
async def get_conversation(conv: ExistingConversation) -> ConversationOut:
    return ConversationOut.model_validate(conv)


@router.delete(
    f"{CONVERSATIONS}/{{cid}}",
    status_code=204,
    responses={409: {"description": "New submissions kept arriving while its turns were ended"}},
)
async def delete(res: Res, agent: AgentClass, conv: ExistingConversation) -> Response:
    """Delete the conversation and everything of it: its schedules, its turns (a running or
    paused one cancelled first, its workflow left to close), its messages, configuration,
    memory blocks, MCP servers and workspace. A later submission to the same id starts a new,
    empty conversation."""
    try:
        await delete_conversation(res.store, res.temporal, res.settings.task_queue, agent, conv)
    except ConversationStillActive as exc:
        raise Problem(409, str(exc)) from None
    return Response(status_code=204)


@router.post(
    f"{CONVERSATIONS}/{{cid}}/clear",
    response_model=ConversationOut,
    responses={409: {"description": "New submissions kept arriving while its turns were ended"}},
)
async def clear(res: Res, agent: AgentClass, conv: ExistingConversation) -> ConversationOut:
    """Clear the conversation (Think's `chat-clear`): its queued submissions end `skipped` and
    a running or paused turn is cancelled (those records stay, saying so), the records of its
    other ended turns go, and its next turn starts with none of its messages, which stay in
    the tree off the active path or are deleted (the agent's `clear_history`). Its
    configuration, workspace, memory blocks, MCP servers and schedules stay."""
    try:
        cleared = await clear_conversation(
            res.store, res.temporal, res.settings.task_queue, agent, conv
        )
    except ConversationStillActive as exc:
        raise Problem(409, str(exc)) from None
    except ConversationNotFound as exc:
        raise Problem(404, str(exc)) from None
    return ConversationOut.model_validate(cleared)


@router.post(
    f"{CONVERSATIONS}/{{cid}}/fork",
    response_model=ConversationOut,
    status_code=201,
    responses={
        404: {"description": "No such conversation, or the message is not in it"},
        409: {"description": "`id` names a conversation that exists"},
    },
)
async def fork(res: Res, conv: ExistingConversation, body: ForkConversation) -> ConversationOut:
    """A new conversation whose history is a copy of this one's path up to `message_id` (its
    active leaf): the messages, the summaries over them and the configuration; not the turns,
    the workspace or the memory blocks. 404 when the message is not in this conversation, 409
    when `id` names a conversation that exists."""
    try:
        forked = await fork_conversation(
            res.store,
            conv,
            message_id=body.message_id,
            conversation_id=body.id or new_id("conv"),
            metadata=body.metadata,
        )
    except ForkPointNotFound as exc:
        raise Problem(404, str(exc)) from None
    except ForkTargetExists as exc:
        raise Problem(409, str(exc)) from None
    return ConversationOut.model_validate(forked)


@router.get(f"{CONVERSATIONS}/{{cid}}/messages", response_model=MessagesOut)
async def get_messages(
    res: Res,
    conv: ExistingConversation,
    cid: ConversationId,
    # Message ids are the client's own strings; only a NUL, which no stored id can hold and
    # Postgres refuses in a query (a 500), is ruled out.
    leaf_id: Annotated[str | None, Query(min_length=1, pattern=r"^[^\x00]+$")] = None,
) -> MessagesOut:
    if leaf_id is not None and not await res.store.message_exists(conv.uid, leaf_id):
        raise Problem(404, f"message {leaf_id!r} is not in conversation {cid!r}")
    path = await res.store.path(conv.uid, leaf_id or conv.active_leaf_id)
    return MessagesOut(messages=[m.wire() for m in path])
