"""Temporal workflows: deterministic, no I/O, no user code."""

from think.workflows._connect import connect, connect_config, register_search_attributes
from think.workflows._delivery import DeliveryWorkflow
from think.workflows._turn import (
    AfterTurnWorkflow,
    ParkedActionWorkflow,
    RunTurnWorkflow,
    TurnWorkflow,
    WebhookDeliveryWorkflow,
)

WORKFLOWS = [
    TurnWorkflow,
    AfterTurnWorkflow,
    RunTurnWorkflow,
    ParkedActionWorkflow,
    DeliveryWorkflow,
    WebhookDeliveryWorkflow,
]

__all__ = [
    "WORKFLOWS",
    "AfterTurnWorkflow",
    "DeliveryWorkflow",
    "ParkedActionWorkflow",
    "RunTurnWorkflow",
    "TurnWorkflow",
    "WebhookDeliveryWorkflow",
    "connect",
    "connect_config",
    "register_search_attributes",
]
