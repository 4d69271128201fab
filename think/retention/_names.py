"""Stable names of the retention workflows, activities and ids (never derived from qualnames)."""

from __future__ import annotations

from urllib.parse import quote

SWEEP_WORKFLOW = "think.RetentionSweep"
SWEEP_ACTIVITY = "think.retention_sweep"
ERASE_WORKFLOW = "think.EraseTenant"
ERASE_ACTIVITY = "think.erase_tenant"
SCHEDULE_PREFIX = "think-retention"
ERASE_PREFIX = "think-erase"


def sweep_schedule_id(task_queue: str) -> str:
    """The deployment's retention schedule: one per task queue, armed by its workers."""
    return f"{SCHEDULE_PREFIX}:{quote(task_queue, safe='')}"


def erase_workflow_id(task_queue: str, tenant: str) -> str:
    """A tenant's erasure: one at a time per tenant, whichever gateway asked."""
    return f"{ERASE_PREFIX}:{quote(task_queue, safe='')}:{quote(tenant, safe='')}"
