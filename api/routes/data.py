"""A tenant's data as a data-protection review asks for it: one conversation exported whole
(`GET …/export`), and everything the tenant owns erased (`DELETE /v1/tenant-data`).

Both are the caller's tenant's only, as every `/v1` route is: the export's conversation is
found by (tenant, agent, id), so another tenant's is a 404; the erasure names no tenant but
the caller's. The erasure answers 202 once its workflow is started (Temporal keeps it until it
completes, whatever fails meanwhile); a repeat while it runs names the same workflow.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from api import _turns
from api.deps import ExistingConversation, Res, Tenant
from api.errors import Problem
from api.schemas import (
    CompactionOut,
    ContextBlockOut,
    ConversationExportOut,
    ConversationOut,
    ErasureOut,
    ExportedMessageOut,
    WorkspaceEntryOut,
)
from think.server import (
    ERASE_WORKFLOW,
    EraseInput,
    Workspace,
    erase_workflow_id,
    export_rows,
)

router = APIRouter(tags=["data"])

EVERY_TURN = 1_000_000
"""The export's bound on turn records: all of them, in practice."""


@router.get("/v1/agents/{agent}/conversations/{cid}/export", response_model=ConversationExportOut)
async def export_conversation(res: Res, conv: ExistingConversation) -> ConversationExportOut:
    """The whole conversation as JSON: every message of its tree (all branches), its turn
    records, its workspace's listing, memory blocks, summaries and configuration."""
    rows = await export_rows(res.store, conv.uid)
    turns = await res.store.list_turns(conv.uid, limit=EVERY_TURN)
    files = await Workspace(res.store.db, conv.uid).list()
    base = _turns.base_url(res)
    return ConversationExportOut(
        conversation=ConversationOut.model_validate(conv),
        config=rows.config,
        messages=[ExportedMessageOut.model_validate(m) for m in rows.messages],
        turns=[_turns.turn_out(t, base=base, with_message=True) for t in reversed(turns)],
        workspace=[WorkspaceEntryOut.model_validate(f) for f in files],
        context_blocks=[ContextBlockOut.model_validate(b) for b in rows.context_blocks],
        compactions=[CompactionOut.model_validate(c) for c in rows.compactions],
        exported_at=datetime.now(UTC),
    )


@router.delete(
    "/v1/tenant-data",
    status_code=202,
    response_model=ErasureOut,
    responses={503: {"description": "Temporal could not be reached: nothing was started"}},
)
async def erase_tenant_data(res: Res, tenant: Tenant) -> ErasureOut:
    """Erase everything the caller's tenant owns: its conversations with their messages, turn
    records, streams, usage, workspaces, memory blocks and configuration, its conversations'
    schedules, and its workflows in Temporal (histories and search attributes). 202: it runs
    on the workers and completes within the retention sweep's period; repeating it is safe."""
    workflow_id = erase_workflow_id(res.settings.task_queue, tenant)
    try:
        await res.temporal.start_workflow(
            ERASE_WORKFLOW,
            EraseInput(tenant=tenant),
            id=workflow_id,
            task_queue=res.settings.task_queue,
            # One erasure at a time per tenant: a repeat joins the running one, and one asked
            # after it completed runs again (for what was written since).
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            static_summary=f"erase tenant {tenant!r}",
        )
    except RPCError as exc:
        raise Problem(
            503, f"the erasure could not be started (Temporal: {exc.message}); retry"
        ) from None
    return ErasureOut(tenant=tenant, workflow_id=workflow_id, status="accepted")
