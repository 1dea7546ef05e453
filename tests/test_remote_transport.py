"""VX-REMOTE-2: how a remote exchange runs inside a WSGI request (serving.transport). The SDK's
exchange runs on the loop the process keeps; what the persona's server hands back (the stamp
read, handle()) runs on the request's own thread, so a remote call is decided on the request's
database connection and in its transaction, exactly as a local one."""

import contextvars
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from django.test import RequestFactory
from mcp import types
from mcp.server.lowlevel import Server

from personas.models import AuditEvent
from serving import transport
from serving.mcp_server import build_server
from tests.runtime_support import standing_persona

HEADERS = {
    "HTTP_ACCEPT": "application/json, text/event-stream",
    "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25",
}
HANDED_BACK: contextvars.ContextVar[str] = contextvars.ContextVar("handed_back", default="unset")


def call_request(name: str = "probe", arguments: dict[str, Any] | None = None) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}},
    }
    return RequestFactory().post(
        "/mcp/probe", data=json.dumps(body), content_type="application/json", **HEADERS
    )


def probe_server(work: Callable[[], dict[str, Any]]) -> Server:
    """A server whose one tool hands `work` back to the request's thread, as the persona's does."""
    server: Server = Server("probe", version="1")

    async def on_call(request: types.CallToolRequest) -> types.ServerResult:
        HANDED_BACK.set("set by the exchange")
        result = await transport.in_request_thread(work)
        return types.ServerResult(
            types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(result))],
                structuredContent=result,
            )
        )

    server.request_handlers[types.CallToolRequest] = on_call
    return server


def structured(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    return json.loads(response.content)["result"]["structuredContent"]


def within[Result](work: Callable[[], Result], seconds: float = 30) -> tuple[Result, int]:
    """`work()` on a thread of its own (the request's thread, when it answers an exchange), and
    that thread's id: a failure, not a hang of the whole run, when it does not end in time."""
    done: list[Result] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    assert done, f"no answer within {seconds:g} s: the exchange or its request thread is held"
    assert thread.ident is not None
    return done[0], thread.ident


def answered(server: Server, request: Any) -> Any:
    return within(lambda: transport.answer(server, request))[0]


def test_what_the_exchange_hands_back_runs_on_the_requests_thread_with_its_context() -> None:
    """VX-REMOTE-2: the handed-back work runs on the thread that answers the request (its
    database connection), sees what the exchange set in its context, and the exchange itself
    runs elsewhere, on the kept loop."""

    def work() -> dict[str, Any]:
        return {"thread": threading.get_ident(), "context": HANDED_BACK.get()}

    response, request_thread = within(lambda: transport.answer(probe_server(work), call_request()))
    assert structured(response) == {"thread": request_thread, "context": "set by the exchange"}
    assert request_thread != threading.get_ident()
    assert transport.kept_loop().is_running()
    assert not transport.kept_loop().is_closed()


@pytest.mark.django_db
def test_a_remote_call_is_audited_in_the_requests_transaction() -> None:
    """VX-REMOTE-2: handle() runs inside the request's transaction (the test's): the audit
    record of the call is visible to the request that made it, and goes with its rollback."""
    persona = standing_persona()
    server = build_server(persona, one_request=True)
    outside = call_request("workspace_read", {"path": "../../etc/passwd"})
    answered = structured(transport.answer(server, outside))
    assert answered["ok"] is False
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CALL_REFUSED)
    assert event.data["tool"] == "workspace_read"
    assert event.correlation_id == answered["correlation_id"]


def test_a_failure_handed_back_is_the_calls_error_and_the_thread_answers_again() -> None:
    """VX-REMOTE-2: an exception in the handed-back work is answered as the SDK answers a
    failing handler (a JSON-RPC error naming it), and the same thread's next exchange is
    answered as usual."""

    def failing() -> dict[str, Any]:
        raise RuntimeError("the work failed")

    def both() -> tuple[Any, Any]:
        failed = transport.answer(probe_server(failing), call_request())
        return failed, transport.answer(probe_server(lambda: {"ok": True}), call_request())

    (failed, again), _ = within(both)
    assert failed.status_code == 200
    assert json.loads(failed.content)["error"]["message"] == "the work failed"
    assert structured(again) == {"ok": True}


def test_exchanges_of_several_request_threads_share_the_loop_and_keep_their_answers() -> None:
    """VX-REMOTE-2: the web server's request threads answer at once on one kept loop; each gets
    its own call's answer, its work run on itself."""
    answers: dict[int, Any] = {}
    start = threading.Barrier(4)

    def request_thread() -> None:
        start.wait()
        me = threading.get_ident()
        server = probe_server(lambda: {"thread": threading.get_ident()})
        answers[me] = structured(transport.answer(server, call_request()))

    threads = [threading.Thread(target=request_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(answers) == 4
    assert all(answer == {"thread": ident} for ident, answer in answers.items())


def test_a_forked_process_starts_a_loop_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """VX-REMOTE-2: a web worker forked after its parent started the loop has the loop object
    but not its thread; it starts its own rather than wait on a loop nobody runs."""
    parents = transport.kept_loop()
    assert transport.kept_loop() is parents
    monkeypatch.setattr(transport, "_loop_pid", -1)
    childs = transport.kept_loop()
    assert childs is not parents
    assert structured(answered(probe_server(lambda: {"ok": True}), call_request())) == {"ok": True}


def test_work_withdrawn_before_it_ran_is_skipped() -> None:
    """A call the exchange gave up on (its task was cancelled) is not run afterwards."""
    request_thread = transport.RequestThread()
    ran: list[str] = []
    withdrawn = request_thread.submit(ran.append, "withdrawn")
    withdrawn.cancel()
    kept = request_thread.submit(ran.append, "kept")
    done: Future[None] = Future()
    kept.add_done_callback(lambda _: done.set_result(None))
    within(lambda: request_thread.run_until(done))
    assert ran == ["kept"]
    assert withdrawn.cancelled()


def test_a_stream_that_listens_past_the_body_hears_the_client_leave(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REMOTE-2: the SDK's answer to a GET is an event stream that listens for the client to
    leave. Reached past the endpoint's 405 (as a later SDK path might be), it hears at once that
    nothing follows the body and ends: it neither holds the request's thread nor freezes the
    loop that every other exchange of the process runs on.

    The test runs on a loop of its own, and waits on each answer with a time limit: were the
    guard gone, the loop it froze would be this test's alone, and the test would fail rather
    than hang every later remote test of its process."""
    monkeypatch.setattr(transport, "_loop", None)
    stream = RequestFactory().get(
        "/mcp/probe", HTTP_ACCEPT="text/event-stream", HTTP_MCP_PROTOCOL_VERSION="2025-11-25"
    )

    assert answered(probe_server(dict), stream).status_code == 200
    assert structured(answered(probe_server(lambda: {"ok": True}), call_request())) == {"ok": True}
    # It ends because it heard the client leave, not because it failed on what it was told.
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_the_sdk_is_handed_the_request_as_an_asgi_server_would_hand_it() -> None:
    """The scope the SDK reads the request from (ASGI 3.0): method, scheme, path, query,
    headers with lower-case names and latin-1 bytes as WSGI carries them, and the server's and
    the client's addresses."""
    request = RequestFactory().post(
        "/mcp/probe?x=1&y=%C3%A9",
        data=b"{}",
        content_type="application/json",
        HTTP_ACCEPT="application/json",
        HTTP_X_NOTE="\xe9t\xe9",
        REMOTE_ADDR="203.0.113.7",
    )
    scope = transport._scope(request)
    headers = scope.pop("headers")
    assert scope == {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp/probe",
        "raw_path": b"/mcp/probe",
        "query_string": b"x=1&y=%C3%A9",
        "root_path": "",
        "server": ("testserver", 80),
        "client": ("203.0.113.7", 0),
    }
    assert (b"accept", b"application/json") in headers
    assert (b"content-type", b"application/json") in headers
    assert (b"x-note", b"\xe9t\xe9") in headers
    assert all(name == name.lower() for name, _ in headers)


def test_a_request_without_a_query_or_a_client_address_has_empty_ones() -> None:
    request = RequestFactory().post("/mcp/probe", data=b"{}", content_type="application/json")
    del request.META["QUERY_STRING"]
    del request.META["REMOTE_ADDR"]
    scope = transport._scope(request)
    assert (scope["query_string"], scope["client"]) == (b"", ("", 0))


def test_the_exchange_loop_runs_on_a_named_thread_that_never_holds_the_process_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A web worker's exit is not held by the loop's thread, and a thread dump names it."""
    monkeypatch.setattr(transport, "_loop", None)
    before = set(threading.enumerate())
    transport.kept_loop()
    [loop_thread] = set(threading.enumerate()) - before
    assert loop_thread.name == "mcp-exchanges"
    assert loop_thread.daemon


def test_the_sdks_answer_is_passed_on_with_its_status_and_headers_but_not_its_framing() -> None:
    """VX-REMOTE-1: what the SDK answers (its refusal of a protocol version, a notification's
    202 with no body) reaches the client with its status and its content type; its length is
    left to Django, whose middleware may still change the body."""
    refused = answered(
        probe_server(dict),
        RequestFactory().post(
            "/mcp/probe",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            content_type="application/json",
            HTTP_ACCEPT="application/json, text/event-stream",
            HTTP_MCP_PROTOCOL_VERSION="1999-01-01",
        ),
    )
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/json"
    assert json.loads(refused.content)["error"]["message"].startswith(
        "Bad Request: Unsupported protocol version: 1999-01-01"
    )
    noted = answered(
        probe_server(dict),
        RequestFactory().post(
            "/mcp/probe",
            data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            content_type="application/json",
            **HEADERS,
        ),
    )
    assert (noted.status_code, noted.content) == (202, b"")
    ok = answered(probe_server(lambda: {"ok": True}), call_request())
    assert ok["Content-Type"] == "application/json"
    assert not ok.has_header("Content-Length")
