"""Retention and erasure: the deployment's retention sweep (`THINK_TURN_RETENTION_DAYS`,
`THINK_CONVERSATION_RETENTION_DAYS`, an agent's own), run by a Temporal Schedule every worker
arms, and a tenant's erasure (`DELETE /v1/tenant-data`), a workflow started by the gateway
(docs/operating.md, "Retention and erasure").
"""

from think.retention._activities import RetentionActivities
from think.retention._inputs import EraseInput, EraseResult, SweepInput, SweepResult
from think.retention._names import (
    ERASE_WORKFLOW,
    SWEEP_WORKFLOW,
    erase_workflow_id,
    sweep_schedule_id,
)
from think.retention._policy import retention_configured, retention_days
from think.retention._schedule import arm_retention
from think.retention._workflow import EraseTenant, RetentionSweep

__all__ = [
    "ERASE_WORKFLOW",
    "SWEEP_WORKFLOW",
    "EraseInput",
    "EraseResult",
    "EraseTenant",
    "RetentionActivities",
    "RetentionSweep",
    "SweepInput",
    "SweepResult",
    "arm_retention",
    "erase_workflow_id",
    "retention_configured",
    "retention_days",
    "sweep_schedule_id",
]
