"""The retention activities: the sweep and a tenant's erasure, each heartbeating between
batches (a sweep of a large backlog runs for minutes; a heartbeat is how a cancel or a dead
worker is noticed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import activity

from think.retention._inputs import EraseInput, EraseResult, SweepInput, SweepResult
from think.retention._names import ERASE_ACTIVITY, SWEEP_ACTIVITY

if TYPE_CHECKING:
    from think.turns import ThinkService


class RetentionActivities:
    """Holds the worker's turn API (its Postgres and Temporal); one per worker."""

    def __init__(self, service: ThinkService) -> None:
        self.service = service

    def activities(self) -> list[Any]:
        return [self.sweep, self.erase]

    @activity.defn(name=SWEEP_ACTIVITY)
    async def sweep(self, request: SweepInput) -> SweepResult:
        # Here, not at the top: the workflow module imports this package, and the workflow
        # sandbox must not load the storage stack (tests/house/test_layers.py).
        from think.retention._sweep import sweep

        return await sweep(self.service, batch=request.batch, progress=activity.heartbeat)

    @activity.defn(name=ERASE_ACTIVITY)
    async def erase(self, request: EraseInput) -> EraseResult:
        from think.retention._erasure import erase_tenant

        return await erase_tenant(
            self.service, request.tenant, batch=request.batch, progress=activity.heartbeat
        )
