"""A real HTTP server on 127.0.0.1 for tests that need one to fetch from (card import, peer
registries): a free port, a thread per request, quiet logs, stopped on leaving the `with`."""

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and answers a whole body in one call."""

    def send(self, status: int, body: bytes, content_type: str | None = "application/json") -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.write_body(body)

    def write_body(self, body: bytes) -> None:
        # The client hangs up on a body too large or too slow: that is what some tests try.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class LoopbackServer:
    """Serves `handler` on 127.0.0.1; `origin` is its `http://127.0.0.1:<port>`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
