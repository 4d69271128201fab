"""A conversation's workspace, for a person: read a file the agent wrote, list them all.

The bytes are served with the media type they were stored with, but never as a page of this
origin: `Content-Security-Policy: sandbox` and `nosniff` keep an HTML or SVG file the model
wrote from running script next to the API's credentials.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response

from api.deps import ExistingConversation, Res
from api.errors import Problem
from api.schemas import EXTENSION, WORKSPACE_PATH, WorkspaceEntryOut, WorkspaceListOut
from think.server import Workspace, WorkspacePathError, workspace_path

router = APIRouter(tags=["workspace"])

WORKSPACE = "/v1/agents/{agent}/conversations/{cid}/workspace"

_SAFE_HEADERS = {
    "Content-Security-Policy": "sandbox",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


MAX_PATH = 1024
"""Characters of a path as sent (`think.storage.workspace_path` allows as many once cleaned)."""
_RULES = (
    ": relative to the workspace (notes/todo.md) or under /workspace/; no control character, "
    "backslash or `..` segment; whitespace around it is ignored"
)
_PATTERN: dict[str, Any] = {"pattern": WORKSPACE_PATH}
"""What `workspace_path` accepts, said in the document; `_checked` refuses the rest with a 422
that says why (a mismatch of a pattern this long would not)."""


def _checked(path: str, field: str, *, allow_root: bool) -> str:
    try:
        return workspace_path(path, allow_root=allow_root)
    except WorkspacePathError as exc:
        raise Problem(422, str(exc), errors=[{"field": field, "message": str(exc)}]) from None


async def _workspace(res: Res, conv: ExistingConversation) -> Workspace:
    return Workspace(res.store.db, conv.uid)


ConversationWorkspace = Annotated[Workspace, Depends(_workspace)]
"""The files of the conversation the path names (a 404 when there is no such conversation)."""


async def _listing(workspace: Workspace, prefix: str) -> WorkspaceListOut:
    entries = await workspace.list(prefix)
    return WorkspaceListOut(files=[WorkspaceEntryOut.model_validate(e) for e in entries])


@router.get(WORKSPACE, response_model=WorkspaceListOut, openapi_extra=EXTENSION)
async def list_workspace(
    workspace: ConversationWorkspace,
    prefix: Annotated[
        str,
        Query(
            max_length=MAX_PATH,
            description=f"A directory to list{_RULES}",
            json_schema_extra=_PATTERN,
        ),
    ] = "",
) -> WorkspaceListOut:
    """Every file of the conversation's workspace (under `prefix`), by path."""
    return await _listing(workspace, _checked(prefix, "prefix", allow_root=True))


@router.get(
    f"{WORKSPACE}/{{path:path}}",
    responses={200: {"content": {"application/octet-stream": {}}}},
)
async def read_workspace(
    conv: ExistingConversation,
    workspace: ConversationWorkspace,
    path: Annotated[
        str,
        Path(
            max_length=MAX_PATH,
            description=f"The file's path in the workspace{_RULES}",
            json_schema_extra=_PATTERN,
        ),
    ],
) -> Response:
    """The file's bytes; a directory (a path with files below it) answers its listing."""
    clean = _checked(path, "path", allow_root=True)
    if clean:
        found = await workspace.read(clean)
        if found is not None:
            return Response(found.data, media_type=found.media_type, headers=_SAFE_HEADERS)
    listing = await _listing(workspace, clean)
    if not listing.files:
        raise Problem(404, f"there is no file {clean!r} in the workspace of {conv.id!r}")
    return Response(listing.model_dump_json(), media_type="application/json")
