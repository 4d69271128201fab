"""`GET /problems/{name}`: what a problem type of ours means, for whoever follows its `type`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from api._budgets import DESCRIBED
from api.errors import Problem

router = APIRouter(tags=["operations"])


@router.get("/problems/{name}", response_class=PlainTextResponse)
async def problem_type(name: str) -> PlainTextResponse:
    """A problem type's meaning, in words (the `type` of a problem document names it)."""
    described = DESCRIBED.get(name)
    if described is None:
        raise Problem(404, f"no problem type {name!r}; known: {', '.join(sorted(DESCRIBED))}")
    return PlainTextResponse(described)
