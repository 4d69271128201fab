"""The Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a turn as a task.

Task creation is server-directed: a `tools/call` whose request declares the extension in its
per-request client capabilities is answered at once with the admitted turn as a task
(`resultType: "task"`), its id the turn's. `tasks/get` shows the turn (working, waiting for
approvals as `input_required` with the elicitations, or ended with the tool result);
`tasks/update` records the answers to those approvals through the approval route's path;
`tasks/cancel` cancels the turn through `think.server.cancel_turn`. Nothing is kept in the
gateway's memory: any gateway answers for any task, from Postgres.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    ElicitResult,
    InputResponses,
    RequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from api.mcp._turns import approval_requests, caller_of, decide, task_turn, tool_result
from think.server import TERMINAL_STATUSES, TurnRecord, cancel_turn, public_turn_id

TASKS = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised under the server's `capabilities.extensions`."""
POLL_INTERVAL_MS = 500
MISSING_CAPABILITY = -32021
"""The extension's "Missing Required Client Capability" error code."""


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=300)


class UpdateTaskParams(TaskParams):
    input_responses: InputResponses = Field(alias="inputResponses")


def requested(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension (per request, on 2026-07-28)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS in extensions


def _require(ctx: ServerRequestContext[Any, Any]) -> None:
    if not requested(ctx):
        raise MCPError(
            code=MISSING_CAPABILITY,
            message="Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
        )


def _task(turn: TurnRecord) -> dict[str, Any]:
    """The turn as a `DetailedTask`: its status, and the payload that status carries."""
    updated = turn.completed_at or turn.started_at or turn.created_at
    task: dict[str, Any] = {
        "taskId": public_turn_id(turn.id),
        "status": "working",
        "createdAt": turn.created_at.isoformat(),
        "lastUpdatedAt": updated.isoformat(),
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if turn.status == "aborted":
        task.update(status="cancelled", statusMessage=turn.error or "cancelled")
    elif turn.status in TERMINAL_STATUSES:
        # A turn that ended in error is a tool error (`isError`), not a JSON-RPC failure.
        result = tool_result(turn).model_dump(by_alias=True, mode="json", exclude_none=True)
        task.update(status="completed", result=result)
    else:
        asked = approval_requests(turn)
        if asked:
            task.update(
                status="input_required",
                statusMessage="waiting for approval",
                inputRequests={
                    key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for key, request in asked.items()
                },
            )
        elif turn.status == "awaiting_client_tool":
            task["statusMessage"] = "waiting for a client tool's result"
    return task


def created(turn: TurnRecord) -> dict[str, Any]:
    """`CreateTaskResult` for a turn just admitted (durably: a `tasks/get` finds it)."""
    return {"resultType": "task", **_task(turn)}


async def get_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    _require(ctx)
    return {"resultType": "complete", **_task(await task_turn(caller_of(ctx), params.task_id))}


async def update_task(
    ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
) -> dict[str, Any]:
    _require(ctx)
    caller = caller_of(ctx)
    turn = await task_turn(caller, params.task_id)
    answers = {k: v for k, v in params.input_responses.items() if isinstance(v, ElicitResult)}
    await decide(caller, turn, answers)
    return {"resultType": "complete"}


async def cancel_task(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    _require(ctx)
    caller = caller_of(ctx)
    turn = await task_turn(caller, params.task_id)
    res = caller.res
    await cancel_turn(res.store, res.temporal, res.settings.task_queue, turn, "cancelled over MCP")
    return {"resultType": "complete"}
