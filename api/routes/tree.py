"""The message tree over HTTP: appending without a turn, regenerating an answer, listing the
siblings of a message and switching the active branch. Nothing here deletes a message.

Reading a path (`GET …/messages`, the active one or the one to `leaf_id`) is in
`conversations.py`; `think/storage/_tree.py` holds the logic.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from api import _turns
from api.deps import (
    AgentClass,
    ConversationId,
    ExistingConversation,
    IdempotencyKey,
    Res,
    Tenant,
)
from api.schemas import (
    AddMessagesBody,
    AddMessagesOut,
    ConversationOut,
    RegenerateBody,
    SiblingsOut,
    SwitchBranchBody,
)

router = APIRouter(tags=["conversations"])

CONVERSATION = "/v1/agents/{agent}/conversations/{cid}"
# Message ids are the client's own strings; only a NUL, which no stored id can hold and
# Postgres refuses in a query (a 500), is ruled out.
MessageId = Annotated[
    str, Path(min_length=1, max_length=200, pattern=r"^[^\x00]+$", description="A message id")
]


@router.post(
    f"{CONVERSATION}/messages",
    status_code=201,
    response_model=AddMessagesOut,
    responses={
        409: {"description": "A message id is taken by a message with other content"},
        422: {"description": "An invalid message, or a parent_id that is not in the tree"},
    },
)
async def add_messages(
    res: Res, tenant: Tenant, agent: AgentClass, cid: ConversationId, body: AddMessagesBody
) -> AddMessagesOut:
    """Append messages without a model turn (Think's `addMessages`), as a chain under
    `parent_id` or the active leaf; the active leaf moves to the last one appended.

    Idempotent by message id: a message already stored with the same content is left alone
    (a repeat of the whole request changes nothing and answers the same); the same id with
    other content is a 409 naming `messages.N.id`. Creates the conversation if needed, like
    submitting a turn does.
    """
    conv, _ = await res.store.create_conversation(
        tenant=tenant, agent=agent.name, conversation_id=cid, metadata={}
    )
    appended = await res.store.add_messages(conv.uid, body.messages, parent_id=body.parent_id)
    return AddMessagesOut(
        messages=[m.wire() for m in appended.messages], active_leaf_id=appended.active_leaf_id
    )


@router.get(f"{CONVERSATION}/messages/{{message_id}}/siblings", response_model=SiblingsOut)
async def get_siblings(res: Res, conv: ExistingConversation, message_id: MessageId) -> SiblingsOut:
    """The messages sharing this message's parent and role (itself included), oldest first:
    the answers of a regenerated turn, or the versions of an edited user message.
    `active_index` says which of them lies on the active path."""
    found = await res.store.siblings(conv.uid, message_id)
    return SiblingsOut(messages=[m.wire() for m in found.messages], active_index=found.active_index)


@router.put(f"{CONVERSATION}/active-leaf", response_model=ConversationOut)
async def switch_branch(
    res: Res, conv: ExistingConversation, body: SwitchBranchBody
) -> ConversationOut:
    """Switch the active branch in one call. `leaf_id` may be any message: the active leaf
    becomes the newest leaf below it, reached by following the newest child each time (the
    message itself when it has no children), so switching to a sibling shows its whole
    branch. With `"exact": true` the active leaf is exactly `leaf_id`."""
    updated = await res.store.switch_branch(conv.uid, body.leaf_id, exact=body.exact)
    return ConversationOut.model_validate(updated)


@_turns.admission_route(
    router,
    f"{CONVERSATION}/regenerate",
    {
        404: "No such message in the conversation",
        409: "The Idempotency-Key was used with a different body",
        422: "The message is not an assistant message that answers one",
    },
)
async def regenerate(
    res: Res,
    tenant: Tenant,
    agent: AgentClass,
    conv: ExistingConversation,
    body: RegenerateBody,
    idempotency_key: IdempotencyKey = None,
) -> Any:
    """A new answer to the message `message_id` answers, on a sibling branch: a turn that
    appends no message, sees the path up to that message's parent (not the old answer) and
    whose answer becomes the active leaf when it completes. The old answer is kept."""
    return await _turns.regenerate(
        res, agent, conv, body, tenant=tenant, idempotency_key=idempotency_key
    )
