"""The one place that knows how we talk to Temporal, shared by the gateway, workers and CLI.

Both sides must agree on the data converter and on names; building the client here (and nowhere
else) makes a disagreement impossible.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from think._settings import Settings
from think.workflows._otel import tracing_interceptors
from think.workflows.names import SEARCH_ATTRIBUTES


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.require_temporal_address(),
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        # OpenTelemetry spans from the API through workflows to activities, when
        # OTEL_EXPORTER_OTLP_ENDPOINT is set; workers built on this client inherit it.
        interceptors=tracing_interceptors(),
    )


async def register_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add the Think search attributes that are missing; returns the names it added."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = [
        name
        for name in SEARCH_ATTRIBUTES
        if name not in existing.custom_attributes and name not in existing.system_attributes
    ]
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={
                    name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing
                },
            )
        )
    return missing
