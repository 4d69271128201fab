"""OpenTelemetry: one trace from the API's span through workflows to activities, on real Temporal.

The chain test mirrors a turn's shape (update-with-start of a long-lived workflow, a child
workflow, an activity, and the application's own span inside the activity) and records spans in
memory. The switch itself (`OTEL_EXPORTER_OTLP_ENDPOINT` → an interceptor on `connect`'s
client) is checked in a subprocess, because it installs a process-wide tracer provider.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from temporalio import activity, workflow
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from think._settings import Settings
from think.dev import Services
from think.exceptions import ConfigurationError
from think.workflows import connect
from think.workflows._otel import service_name, tracing_interceptor, tracing_interceptors


class Tool:
    """An activity that, like a tool, starts a span of its own."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    @activity.defn(name="otel-test-tool")
    async def run(self, city: str) -> str:
        with self.tracer.start_as_current_span("tool-body"):
            return f"sunny in {city}"


@workflow.defn(name="OtelTestTurn")
class Turn:
    @workflow.run
    async def run(self, city: str) -> str:
        return await workflow.execute_activity_method(
            Tool.run, city, start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(name="OtelTestConversation")
class Conversation:
    def __init__(self) -> None:
        self.queued: list[str] = []

    @workflow.update(name="submit")
    async def submit(self, city: str) -> None:
        self.queued.append(city)

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: bool(self.queued))
        return await workflow.execute_child_workflow(
            Turn.run, self.queued[0], id=f"{workflow.info().workflow_id}-turn"
        )


async def test_api_workflow_child_and_activity_spans_form_one_trace(services: Services) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otel-test")
    client = await Client.connect(
        services.temporal_address,
        namespace=services.temporal.namespace,
        interceptors=[tracing_interceptor(provider)],
    )
    task_queue = f"otel-{secrets.token_hex(4)}"
    async with Worker(
        client,  # the worker inherits the client's interceptor, as our workers do
        task_queue=task_queue,
        workflows=[Conversation, Turn],
        activities=[Tool(tracer).run],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        with tracer.start_as_current_span("POST /turns"):  # the gateway's request span
            start = WithStartWorkflowOperation(
                Conversation.run,
                id=f"otel-conv-{secrets.token_hex(4)}",
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            accepted = client.execute_update_with_start_workflow(
                Conversation.submit, "Oslo", start_workflow_operation=start
            )
            assert await accepted is None
        handle = await start.workflow_handle()
        assert await handle.result() == "sunny in Oslo"

    spans = {span.name: span for span in exporter.get_finished_spans()}

    def ancestors(name: str) -> list[str]:
        chain: list[str] = []
        span = spans[name]
        while span.parent is not None:
            (span,) = [s for s in spans.values() if _id(s) == span.parent.span_id]
            chain.append(span.name)
        return chain

    # The tool's own span hangs, through the activity, the child turn and the update-with-start,
    # off the gateway's request span: one trace from the HTTP request to the tool's body.
    assert ancestors("tool-body") == [
        "RunActivity:otel-test-tool",
        "StartActivity:otel-test-tool",
        "StartChildWorkflow:OtelTestTurn",
        "StartUpdateWithStartWorkflow:OtelTestConversation",
        "POST /turns",
    ]
    # Workflow spans are zero-length markers (TracingInterceptor: a workflow may run for days
    # and replay), children of the call that started them; the workflow's own calls hang off
    # that same incoming context.
    assert ancestors("RunWorkflow:OtelTestConversation")[0] == (
        "StartUpdateWithStartWorkflow:OtelTestConversation"
    )
    assert (
        ancestors("HandleUpdate:submit")[0] == "StartUpdateWithStartWorkflow:OtelTestConversation"
    )
    assert ancestors("RunWorkflow:OtelTestTurn")[0] == "StartChildWorkflow:OtelTestTurn"
    assert len({_trace(s) for s in spans.values()}) == 1


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def _trace(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


async def test_connect_adds_no_interceptor_without_the_variable(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert tracing_interceptors() == []
    client = await connect(services.settings())
    assert list(client.config()["interceptors"]) == []


_PROBE = """
import asyncio, json, sys
from opentelemetry import trace
from temporalio.contrib.opentelemetry import TracingInterceptor
from think._settings import Settings
from think.workflows import connect

async def main():
    client = await connect(Settings(temporal_address=sys.argv[1], temporal_namespace=sys.argv[2]))
    provider = trace.get_tracer_provider()
    print(json.dumps({
        "interceptors": [type(i).__name__ for i in client.config()["interceptors"]],
        "tracing": any(isinstance(i, TracingInterceptor) for i in client.config()["interceptors"]),
        "service": provider.resource.attributes.get("service.name"),
    }))

asyncio.run(main())
"""


def test_the_variable_turns_tracing_on_in_connect(services: Services) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    # Nothing listens on the discard port; no span is made, so nothing is ever sent there.
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    env["OTEL_SERVICE_NAME"] = "think-api"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, services.temporal_address, services.temporal.namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["tracing"] is True, probe
    assert probe["service"] == "think-api"


def test_the_service_name_defaults_to_think() -> None:
    assert service_name({}) == "think"
    assert service_name({"OTEL_SERVICE_NAME": " "}) == "think"
    assert service_name({"OTEL_SERVICE_NAME": "think-worker"}) == "think-worker"


async def test_missing_packages_are_a_configuration_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    # As if opentelemetry-exporter-otlp-proto-http were not installed.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigurationError, match=r"think\[otel\]"):
        tracing_interceptors()
    with pytest.raises(ConfigurationError, match="otel"):
        await connect(Settings(temporal_address="127.0.0.1:1"))


def test_otel_sdk_disabled_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing_interceptors() == []
