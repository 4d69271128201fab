from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator

from api.deps import ExistingConversation, Res
from api.schemas import NOT_BLANK, SearchHitOut, SearchOut
from think.server import MAX_SEARCH_LIMIT, search_messages

router = APIRouter(tags=["conversations"])


def _not_blank(q: str) -> str:
    if not q.strip():
        raise ValueError("the search query must not be blank")
    if "\x00" in q:  # Postgres refuses a NUL in a query (a 500)
        raise ValueError("the search query contains a NUL character")
    return q


SearchQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=1000,
        description='What to find, in web-search syntax: words, "a phrase", or, -word',
        # What `_not_blank` accepts, said in the document; it refuses the rest, saying why.
        json_schema_extra={"pattern": NOT_BLANK},
    ),
    AfterValidator(_not_blank),
]


@router.get("/v1/agents/{agent}/conversations/{cid}/search", response_model=SearchOut)
async def search_conversation(
    res: Res,
    conv: ExistingConversation,
    q: SearchQuery,
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_LIMIT)] = 20,
) -> SearchOut:
    """The messages of the conversation (every branch) that match `q`, best first."""
    hits = await search_messages(res.store.db, conv.uid, q, limit=limit)
    return SearchOut(hits=[SearchHitOut(**hit.model_dump()) for hit in hits])
