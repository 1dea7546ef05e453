"""One MCP streamable-HTTP exchange, answered inside a Django (WSGI) request.

The `mcp` SDK's session manager, stateless and answering JSON, handles the request as it would
under an ASGI server: a fresh transport per request, the SDK's own checks of the headers, the
JSON-RPC and the protocol version. The persona's server calls into the ORM through
`sync_to_async(thread_sensitive=True)`, which comes back to this request's thread and its
database connection.
"""

from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


def _scope(request: HttpRequest) -> dict[str, Any]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
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
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "server": (request.get_host(), int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _exchange(server: Server, scope: dict[str, Any], body: bytes) -> HttpResponse:
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
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
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response


def answer(server: Server, request: HttpRequest) -> HttpResponse:
    return async_to_sync(_exchange)(server, _scope(request), request.body)
