"""OpenTelemetry spans (VX-AUDIT-1): one `virgo.handle` span per handle() call carrying the
persona, tool, verdict, rule and correlation id, none for a dry run, no argument's value on
any span; OTLP/HTTP only when configured, checked live against a receiver on loopback."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime.explain import explain
from runtime.handler import decide, handle
from runtime.vectors import export
from tests.runtime_support import (
    RecordingTransport,
    correlation,
    handle_spans,
    in_memory_spans,
    recording_transport,
    standing_persona,
    start_standalone,
)
from virgo import telemetry

pytestmark = pytest.mark.django_db

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture(autouse=True)
def hub() -> Iterator[RecordingTransport]:
    with recording_transport() as recording:
        yield recording


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with in_memory_spans() as exporter:
        yield exporter


def every_value(span: ReadableSpan) -> str:
    return " ".join(
        [span.name, *(f"{key}={value}" for key, value in (span.attributes or {}).items())]
        + [str(event.attributes) for event in span.events]
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "verdict", "rule", "code"),
    [
        ("list_peers", {}, "allow", "default-allow", "ok"),
        (
            "workspace_write",
            {"path": "memory/old.md", "mode": "delete"},
            "confirm",
            "workspace-delete",
            "confirmation_required",
        ),
        ("workspace_read", {"path": "memory/.env"}, "deny", "secret-path", "boundary_denied"),
        ("trigger_webhook", {"webhook": "ci"}, "refused", "not_granted", "not_granted"),
    ],
)
def test_a_handle_call_makes_exactly_one_span_with_its_decision(
    spans: InMemorySpanExporter, tool: str, arguments: dict[str, Any], verdict: str, rule: str,
    code: str,
) -> None:  # fmt: skip
    """VX-AUDIT-1: persona, tool, verdict, rule and correlation id on the one span."""
    persona = standing_persona()
    cid = correlation()
    spans.clear()
    result = handle(persona, tool, arguments, cid)
    assert result.get("code", "ok") == code
    [span] = handle_spans(spans)
    assert dict(span.attributes or {}) == {
        "virgo.persona": str(persona.uuid),
        "virgo.tool": tool,
        "virgo.correlation_id": cid,
        "virgo.verdict": verdict,
        "virgo.rule": rule,
        "virgo.code": code,
    }
    # The same words explain uses for the same call.
    found = explain(persona, tool, arguments)
    assert (found.verdict, str(found.rule.get("id") or found.code)) == (verdict, rule)


def test_explain_decide_and_vectors_make_no_handle_span(spans: InMemorySpanExporter) -> None:
    persona = standing_persona()
    spans.clear()
    explain(persona, "workspace_write", {"path": "QUEUE.md", "content": "x"})
    decide(persona, "list_peers", {}, correlation(), dry_run=True)
    export(persona)
    assert handle_spans(spans) == []


def test_no_argument_value_reaches_a_span(spans: InMemorySpanExporter) -> None:
    """VX-AUDIT-1: a call carrying a secret (refused) and one writing content (allowed): the
    spans carry neither value, nor the refusal's reason."""
    persona = standing_persona()
    spans.clear()
    refused = handle(persona, "send_broker_message", {"body": f"here: {SECRET}"}, correlation())
    assert refused["code"] == "boundary_denied"
    handle(
        persona, "workspace_write", {"path": "notes.md", "content": "tea at noon"}, correlation()
    )
    found = handle_spans(spans)
    assert len(found) == 2
    for span in found:
        text = every_value(span)
        assert SECRET not in text and "tea at noon" not in text and "notes.md" not in text


def test_nothing_configured_means_no_provider_and_no_span(monkeypatch) -> None:
    """Without an endpoint there is no exporter: tracing is off and handle() runs as ever."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert telemetry.provider_for({}) is None
    disabled = {"OTEL_SDK_DISABLED": "true", telemetry.ENDPOINT: "http://127.0.0.1:4318"}
    assert telemetry.traces_endpoint(disabled) is None
    assert telemetry.tracer("virgo.runtime") is None
    assert telemetry.configure() is False
    persona = standing_persona()
    assert handle(persona, "list_peers", {}, correlation())["ok"] is True


def test_the_endpoint_is_read_as_the_exporter_reads_it() -> None:
    assert telemetry.traces_endpoint({telemetry.ENDPOINT: "http://collector:4318/"}) == (
        "http://collector:4318/v1/traces"
    )
    assert (
        telemetry.traces_endpoint(
            {
                telemetry.ENDPOINT: "http://collector:4318",
                telemetry.TRACES_ENDPOINT: "http://traces:4318/custom",
            }
        )
        == "http://traces:4318/custom"
    )


# Live: a real OTLP/HTTP receiver on loopback ---------------------------------------------------


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: decodes each ExportTraceServiceRequest it is sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.requests: list[Any] = []
        self.paths: list[str] = []
        self.arrived = threading.Event()


class ReceiverHandler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.paths.append(self.path)
        self.server.requests.append((self.headers.get("Content-Type"), request))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        self.server.arrived.set()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def attributes_of(span: Any) -> dict[str, str]:
    return {attribute.key: attribute.value.string_value for attribute in span.attributes}


@pytest.mark.live
def test_a_handle_span_arrives_at_a_real_otlp_receiver(receiver: Receiver) -> None:
    """VX-AUDIT-1, live: the provider virgo.telemetry makes from the environment's endpoint
    exports the handle() span over OTLP/HTTP protobuf to a receiver on loopback."""
    port = receiver.server_address[1]
    provider = telemetry.provider_for(
        {telemetry.ENDPOINT: f"http://127.0.0.1:{port}", "OTEL_SERVICE_NAME": "virgo-test"}
    )
    assert provider is not None
    previous = telemetry.install(provider)
    try:
        persona = standing_persona()
        cid = correlation()
        handle(persona, "send_broker_message", {"body": f"here: {SECRET}"}, cid)
        assert provider.force_flush(10_000)
    finally:
        telemetry.install(previous)
        provider.shutdown()
    assert receiver.arrived.wait(10)
    assert receiver.paths == ["/v1/traces"]
    content_type, request = receiver.requests[0]
    assert content_type == "application/x-protobuf"
    [resource] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "virgo-test"
    found = [
        span
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == "virgo.handle"
    ]
    assert len(found) == 1
    assert attributes_of(found[0]) == {
        "virgo.persona": str(persona.uuid),
        "virgo.tool": "send_broker_message",
        "virgo.correlation_id": cid,
        "virgo.verdict": "deny",
        "virgo.rule": "secret-values",
        "virgo.code": "boundary_denied",
    }
    assert SECRET not in request.SerializeToString().decode("latin-1")


@pytest.mark.live
def test_a_real_virgo_process_configured_by_its_environment_exports_its_spans(
    receiver: Receiver, tmp_path: Path
) -> None:
    """VX-AUDIT-1, live: `manage.py shell` with OTEL_EXPORTER_OTLP_ENDPOINT set calls handle()
    once; the process sends its `virgo.handle` span to the receiver as it exits."""
    import dataclasses

    home = tmp_path / "standalone"
    home.mkdir(mode=0o700)
    standalone = start_standalone(home)
    uuid = next(iter(standalone.personas.values()))
    port = receiver.server_address[1]
    traced = dataclasses.replace(
        standalone,
        env={**standalone.env, telemetry.ENDPOINT: f"http://127.0.0.1:{port}"},
    )
    script = (
        "from personas.models import Persona\n"
        "from runtime.handler import handle\n"
        f"persona = Persona.objects.get(uuid='{uuid}')\n"
        "print(handle(persona, 'list_peers', {}, 'live-otlp-1').get('ok'))\n"
    )
    ran = traced.run("shell", "-c", script)
    assert ran.returncode == 0, ran.stderr
    assert "True" in ran.stdout
    assert receiver.arrived.wait(10)
    found = [
        span
        for _, request in receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == "virgo.handle"
    ]
    assert len(found) == 1
    attributes = attributes_of(found[0])
    assert (attributes["virgo.persona"], attributes["virgo.correlation_id"]) == (
        uuid,
        "live-otlp-1",
    )
    assert (attributes["virgo.verdict"], attributes["virgo.rule"]) == ("allow", "default-allow")


def test_a_span_that_cannot_be_read_never_changes_the_call(spans: InMemorySpanExporter) -> None:
    from runtime import tracing

    def broken(*args: Any) -> tuple[str, str]:
        raise RuntimeError("a bug in reading the decision")

    previous = tracing.register(broken)
    try:
        persona = standing_persona()
        spans.clear()
        assert handle(persona, "list_peers", {}, correlation())["ok"] is True
    finally:
        tracing.register(previous)
    [span] = handle_spans(spans)
    assert (span.attributes or {})["virgo.verdict"] == "unknown"


def test_the_mcp_server_launch_starts_is_told_the_tracing_settings_and_the_agent_is_not(
    monkeypatch,
) -> None:
    """The tracing variables are Virgo's own settings: into server.env, never to the agent."""
    from serving import launcher

    monkeypatch.setenv(telemetry.ENDPOINT, "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer collector-token")
    told = launcher.server_settings()
    assert told[telemetry.ENDPOINT] == "http://127.0.0.1:4318"
    assert told["OTEL_EXPORTER_OTLP_HEADERS"] == "authorization=Bearer collector-token"
    import os

    agent = launcher.agent_environment(os.environ)
    assert not any(name.startswith("OTEL_") for name in agent)


@pytest.mark.live
def test_a_real_web_process_exports_a_span_per_request(receiver: Receiver, tmp_path: Path) -> None:
    """VX-AUDIT-1, live: virgo-web started with OTEL_EXPORTER_OTLP_ENDPOINT set sends the
    maintained Django instrumentation's span of a request to the receiver."""
    import httpx

    from tests.live import WebServer, wait_until

    home = tmp_path / "standalone"
    home.mkdir(mode=0o700)
    standalone = start_standalone(home)
    env = {
        **standalone.env,
        telemetry.ENDPOINT: f"http://127.0.0.1:{receiver.server_address[1]}",
        # Sent within a fifth of a second, not at the SDK's default five.
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    server = WebServer(tmp_path, env)
    server.start()
    try:
        assert httpx.get(server.base_url + "/", timeout=10).status_code == 200

        def django_spans() -> list[Any]:
            return [
                span
                for _, request in list(receiver.requests)
                for resource in request.resource_spans
                for scope in resource.scope_spans
                if scope.scope.name == "opentelemetry.instrumentation.django"
                for span in scope.spans
            ]

        wait_until(lambda: django_spans(), what="the request's span at the receiver", timeout=30)
    finally:
        server.stop()
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
