"""OpenTelemetry tracing, configured in one place at start-up and only when asked for (VX-AUDIT-1).

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, every Virgo
process (the web server, `virgo <command>`, a Celery worker, an MCP server) exports its spans
over OTLP/HTTP (protobuf) to that collector: a span per request from the maintained Django
instrumentation, and one `virgo.handle` span per tool call (runtime.tracing). Unset, or with
`OTEL_SDK_DISABLED=true`, nothing is configured: no provider, no exporter, no middleware, and
runtime.tracing calls handle() straight through.

The SDK and the exporter are imported only when tracing is configured. The exporter reads the
standard variables it knows itself (`OTEL_EXPORTER_OTLP_HEADERS`, `_TIMEOUT`, `_COMPRESSION`...);
`OTEL_SERVICE_NAME` names the service (default `virgo`). Spans are batched and sent from a
background thread; a process flushes what it holds as it exits.
"""

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
DEFAULT_SERVICE = "virgo"
# The variables tracing reads (here, or the exporter itself): virgo.settings names them among
# its own, so the MCP server `virgo launch` starts is told them in its owner-private file, and
# none of them (a collector's headers may hold its token) ever reaches the agent.
VARIABLES = (
    ENDPOINT,
    TRACES_ENDPOINT,
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_SERVICE_NAME",
    "OTEL_SDK_DISABLED",
)

# The provider Virgo's own spans are made with; None when tracing is not configured.
_provider: Any = None


def traces_endpoint(environ: Mapping[str, str]) -> str | None:
    """Where spans go, as the OTLP/HTTP exporter reads the variables; None: tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    traces = environ.get(TRACES_ENDPOINT, "").strip()
    if traces:
        return traces
    base = environ.get(ENDPOINT, "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else None


def provider_for(environ: Mapping[str, str]) -> Any:
    """A tracer provider exporting over OTLP/HTTP as `environ` says, or None when it says
    nothing; made, not installed."""
    endpoint = traces_endpoint(environ)
    if endpoint is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def configure() -> bool:
    """At start-up (virgo.apps.VirgoConfig.ready, before any request is served): tracing as the
    environment asks, or nothing. Whether it was configured."""
    global _provider
    if _provider is not None:
        return True
    provider = provider_for(os.environ)
    if provider is None:
        return False
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    install(provider)
    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument(tracer_provider=provider)
    return True


def install(provider: Any) -> Any:
    """Make `provider` the one Virgo's own spans use (None: none); returns the one it replaces.
    configure() calls it; tests give an SDK provider with an in-memory exporter."""
    global _provider
    previous, _provider = _provider, provider
    return previous


def tracer(name: str) -> Any:
    """A tracer of the configured provider, or None when tracing is off."""
    return _provider.get_tracer(name) if _provider is not None else None


@contextmanager
def joined(carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """The caller's trace as the parent of the spans made inside: W3C trace context
    (`traceparent`, `tracestate`) from `carrier`, an MCP request's `_meta` (VX-REMOTE-2).
    Nothing when tracing is off or the carrier holds none; a malformed one is ignored."""
    fields = {
        key: value
        for key in ("traceparent", "tracestate")
        if isinstance(value := (carrier or {}).get(key), str) and len(value) <= 512
    }
    if _provider is None or "traceparent" not in fields:
        yield
        return
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    token = context.attach(TraceContextTextMapPropagator().extract(fields))
    try:
        yield
    finally:
        context.detach(token)
