"""A tenant's erasure (`DELETE /v1/tenant-data`): everything it owns, and nothing else.

In order, each step idempotent, so an attempt cut off anywhere is finished by the next:

1. its conversations, a batch at a time, each through the turns layer's `delete_conversation`
   (its schedules, then its turns ended and their workflows closed, then every row stored of
   it: messages, turn records, stream chunks, answers, usage, summaries, memory blocks, MCP
   servers, configuration, workspace files);
2. its conversation-scope schedules that outlived their conversation (armed, never written);
3. its workflows in Temporal, on this deployment's task queue: the turn workflows its
   `ThinkTenant` search attribute names, their after-turn workflows and its scheduled
   occurrences (their ids name it), deleted with their histories and search attributes
   (`DeleteWorkflowExecution`, which terminates one still running first);
4. the rows it owns outside any conversation: its workspace usage, its submission bucket and
   stream leases.

What stays: agent-scope schedules (the deployment's declarations, not the tenant's data), the
erasure's own workflow (it names the tenant, nothing more) until the namespace's retention, and
workflows a user's own code started (`think.workflow.run_turn`'s callers: their ids are the
user's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import quote, unquote

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from think.agent import Think
from think.exceptions import AgentNotFoundError
from think.retention._inputs import EraseResult
from think.schedules import ScheduleRef
from think.storage import forget_tenant, tenant_conversations
from think.turns import ThinkService, delete_conversation
from think.workflows.names import SA_TENANT, TURN_ID_PREFIX, after_turn_workflow_id

log = logging.getLogger("think.retention")

_SCHEDULE_PREFIX = "think-schedule"


async def erase_tenant(
    service: ThinkService,
    tenant: str,
    *,
    batch: int,
    progress: Callable[[], None] = lambda: None,
) -> EraseResult:
    """Erase everything `tenant` owns (see the module's docstring). Raises
    `ConversationStillActive` while the tenant keeps submitting to a conversation being
    deleted (the activity is retried)."""
    result = EraseResult()
    while found := await tenant_conversations(service.store, tenant, batch):
        for conversation in found:
            agent = _agent(service, conversation.agent)
            await delete_conversation(
                service.store, service.temporal, service.settings.task_queue, agent, conversation
            )
            result.conversations += 1
            progress()
    queue = service.settings.task_queue
    await _delete_schedules(service.temporal, queue, tenant)
    progress()
    terminated, deleted = await _delete_workflows(service.temporal, queue, tenant, progress)
    result.workflows_terminated, result.workflows_deleted = terminated, deleted
    await forget_tenant(service.store, tenant)
    log.info(
        "tenant %r erased: %d conversations, %d workflows deleted (%d were running)",
        tenant,
        result.conversations,
        deleted,
        terminated,
    )
    return result


def _agent(service: ThinkService, name: str) -> type[Think]:
    """The hosted agent of that name; for one no longer hosted, a stand-in of that name (no
    hooks, no scheduled tasks), enough to end its turns and find its listed schedules."""
    try:
        return service.registry.get(name)
    except AgentNotFoundError:
        return type("Unhosted", (Think,), {"name": name})


async def _delete_schedules(client: Client, queue: str, tenant: str) -> None:
    """The tenant's conversation-scope schedules of this deployment (their ids name it)."""
    listed = await client.list_schedules()
    async for entry in listed:
        ref = ScheduleRef.parse(entry.id)
        if ref is None or ref.conversation_id is None:
            continue
        if ref.tenant != tenant or ref.task_queue != queue:
            continue
        try:
            await client.get_schedule_handle(entry.id).delete()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise


def _quoted(value: str) -> str:
    """A value inside a visibility query's single quotes."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _occurrence_tenant(workflow_id: str, queue: str) -> str | None:
    """The tenant a conversation-scope occurrence's workflow id names, on this deployment's
    task queue: the schedule's id (`think-schedule:<queue>:<agent>:<task>:<tenant>:<cid>`,
    each part encoded) and the `-<time>` Temporal appends (an agent-scope occurrence's id has
    four parts before it)."""
    parts = workflow_id.split(":")
    if len(parts) < 7 or parts[0] != _SCHEDULE_PREFIX or unquote(parts[1]) != queue:
        return None
    return unquote(parts[4])


async def _delete_workflows(
    client: Client, queue: str, tenant: str, progress: Callable[[], None]
) -> tuple[int, int]:
    """Delete the tenant's workflows on this deployment's task queue (another deployment
    sharing the namespace may have a tenant of that name); (were running, deleted)."""
    turn_prefix = f"{TURN_ID_PREFIX}:{quote(tenant, safe='')}:"
    here = f"TaskQueue = '{_quoted(queue)}'"
    queries = [
        f"{here} AND {SA_TENANT} = '{_quoted(tenant)}'",
        f"{here} AND WorkflowId STARTS_WITH '{_quoted(after_turn_workflow_id(turn_prefix))}'",
        f"{here} AND WorkflowType = 'think.ScheduledOccurrence' AND WorkflowId STARTS_WITH "
        f"'{_SCHEDULE_PREFIX}:'",
    ]
    running = deleted = 0
    seen: set[tuple[str, str]] = set()
    for query in queries:
        async for found in client.list_workflows(query):
            key = (found.id, found.run_id)
            if key in seen:
                continue
            seen.add(key)
            occurrence = found.workflow_type == "think.ScheduledOccurrence"
            if occurrence and _occurrence_tenant(found.id, queue) != tenant:
                continue
            request = DeleteWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=found.id, run_id=found.run_id),
            )
            try:
                await client.workflow_service.delete_workflow_execution(request)
            except RPCError as error:
                if error.status != RPCStatusCode.NOT_FOUND:
                    raise
                continue  # deleted already (visibility lags behind)
            deleted += 1
            running += found.status == WorkflowExecutionStatus.RUNNING
            if deleted % 100 == 0:
                progress()
    return running, deleted
