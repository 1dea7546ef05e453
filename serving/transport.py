"""One MCP streamable-HTTP exchange, answered inside a Django (WSGI) request.

The `mcp` SDK's session manager, stateless and answering JSON, handles the request as it would
under an ASGI server: a fresh transport per request, the SDK's own checks of the headers, the
JSON-RPC and the protocol version.

The exchange runs on one event loop the process keeps in a thread of its own: a loop and a thread
made for every request (as `async_to_sync` makes them) cost more than the SDK's whole exchange.
The persona server's ORM calls come back to the request's own thread, and so to its database
connection and transaction, through `in_request_thread`: the request's thread waits on the
exchange by running what the exchange hands it.
"""

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


class RequestThread(Executor):
    """Work for the thread that waits on an exchange, run by that thread while it waits."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )

    def submit[Result](
        self, fn: Callable[..., Result], /, *args: Any, **kwargs: Any
    ) -> Future[Result]:
        future: Future[Result] = Future()
        self._work.put((future, lambda: fn(*args, **kwargs)))
        return future

    def run_until(self, done: Future[Any]) -> None:
        done.add_done_callback(lambda _: self._work.put(None))
        while (item := self._work.get()) is not None:
            future, work = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(work())
                except BaseException as error:
                    future.set_exception(error)


_request_thread: contextvars.ContextVar[RequestThread | None] = contextvars.ContextVar(
    "request_thread", default=None
)


async def in_request_thread[Result](fn: Callable[..., Result], *args: Any) -> Result:
    """`fn(*args)` on the request's thread when an exchange of this module runs; elsewhere (the
    stdio and loopback servers run on a loop of their own) as `sync_to_async` runs it."""
    request_thread = _request_thread.get()
    if request_thread is None:
        return await sync_to_async(fn, thread_sensitive=True)(*args)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(request_thread, context.run, fn, *args)


# What HTTP headers and the query string are in WSGI's environ and in an ASGI scope alike.
WIRE_ENCODING = "latin-1"

_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_loop_lock = threading.Lock()


def kept_loop() -> asyncio.AbstractEventLoop:
    """This process's exchange loop, started on first use (again in a forked child, which has
    the loop but not its thread)."""
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():
            _loop = asyncio.new_event_loop()
            _loop_pid = os.getpid()
            threading.Thread(target=_loop.run_forever, name="mcp-exchanges", daemon=True).start()
        return _loop


def _scope(request: HttpRequest) -> dict[str, Any]:
    headers = [
        (name.lower().encode(WIRE_ENCODING), value.encode(WIRE_ENCODING))
        for name, value in request.headers.items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode(WIRE_ENCODING),
        "root_path": "",
        "headers": headers,
        "server": (request.get_host(), int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _exchange(
    server: Server, scope: dict[str, Any], body: bytes, request_thread: RequestThread
) -> HttpResponse:
    _request_thread.set(request_thread)
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    started: dict[str, Any] = {}
    chunks: list[bytes] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        # The WSGI request has nothing after its body. Anything that listens past it (an SSE
        # stream watching for the client to leave) must hear that at once: handed the body
        # again it would spin without yielding, and freeze the loop every exchange shares.
        nonlocal delivered
        if delivered:
            return {"type": "http.disconnect"}
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    response = HttpResponse(b"".join(chunks), status=started.get("status", 500))
    for name, value in started.get("headers", []):
        if name.lower() not in (b"content-length", b"mcp-session-id"):
            response[name.decode(WIRE_ENCODING)] = value.decode(WIRE_ENCODING)
    return response


def answer(server: Server, request: HttpRequest) -> HttpResponse:
    request_thread = RequestThread()
    exchange = asyncio.run_coroutine_threadsafe(
        _exchange(server, _scope(request), request.body, request_thread), kept_loop()
    )
    request_thread.run_until(exchange)
    return exchange.result()
