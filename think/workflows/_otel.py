"""OpenTelemetry tracing of API → workflow → activities, through Temporal's interceptor.

On when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and
`OTEL_SDK_DISABLED` is not `true`. `think.workflows._connect.connect` puts the interceptor on
the one client the gateway, the workers and the CLI share; a `Worker` built on that client
inherits it, so the span of a submit in the API is the parent of its turn workflow's and its
activities'.

The `OTEL_*` variables are OpenTelemetry's own configuration contract and its SDK reads them
itself (endpoint, headers, timeouts, `OTEL_RESOURCE_ATTRIBUTES`), so they are read here rather
than copied into `Settings`. Spans go out over OTLP/HTTP with the service name
`OTEL_SERVICE_NAME` (default `think`). If the application has already installed an SDK tracer
provider (its own set-up, or `opentelemetry-instrument`), that one is used and nothing is added.

The packages are an optional extra (`pip install 'think[otel]'`), imported only when tracing is
on; with the variable set and the packages missing, start-up fails with a `ConfigurationError`.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from temporalio.client import Interceptor

from think.exceptions import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

DEFAULT_SERVICE_NAME = "think"
INSTRUMENTATION_NAME = "think"
# From opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http and temporalio[opentelemetry].
_REQUIRED_MODULES = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "temporalio.contrib.opentelemetry",
)
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_lock = threading.Lock()
_provider: TracerProvider | None = None


def tracing_enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in _ENDPOINT_VARIABLES)


def service_name(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME


def tracing_interceptors() -> list[Interceptor]:
    """The client interceptors `connect` adds: Temporal's tracing interceptor when tracing is
    on (see the module docstring), else none."""
    if not tracing_enabled():
        return []
    return [tracing_interceptor(_process_tracer_provider())]


def tracing_interceptor(tracer_provider: TracerProvider | None = None) -> Interceptor:
    """Temporal's `TracingInterceptor` on `tracer_provider` (default: the global one)."""
    _require_packages()
    from opentelemetry import trace
    from temporalio.contrib.opentelemetry import TracingInterceptor

    provider = tracer_provider or trace.get_tracer_provider()
    return TracingInterceptor(provider.get_tracer(INSTRUMENTATION_NAME))


def _process_tracer_provider() -> TracerProvider:
    """One provider per process, exporting over OTLP/HTTP; installed as the global provider
    (so spans an application's own code starts join the same traces) unless the application
    already installed one."""
    global _provider
    _require_packages()
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with _lock:
        if _provider is not None:
            return _provider
        current = trace.get_tracer_provider()
        if isinstance(current, SDKTracerProvider):
            _provider = current
            return current
        provider = SDKTracerProvider(resource=Resource.create({SERVICE_NAME: service_name()}))
        # Batched, off the event loop; flushed at exit (`shutdown_on_exit`, the default).
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _provider = provider
        return provider


def _require_packages() -> None:
    try:
        for module in _REQUIRED_MODULES:
            importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"OpenTelemetry tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT is set) but {exc.name!r} "
            "is not installed: install the `otel` extra (pip install 'think[otel]'), or unset "
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        ) from exc
