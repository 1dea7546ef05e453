"""What every scripted model server shares (tests/scripted_model.py for Claude Code,
tests/scripted_gemini.py for Gemini CLI): a threaded HTTP server on a loopback port of its own,
the script of turns, every request recorded, and ids that never repeat.

A subclass says how its API's requests look (its `Recorded`, with `is_main`) and answers them
from `_handler()`.
"""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any, Self

type ToolCall = tuple[str, dict[str, Any]]
# The tool calls of one model turn, or its final text.
type Turn = list[ToolCall] | str


class ScriptedServer:
    """`with Subclass(script) as model:` serves on 127.0.0.1 until the block ends."""

    def __init__(self, script: list[Turn]) -> None:
        self.script = script
        self.requests: list[Any] = []
        self._lock = threading.Lock()
        self._ids = count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def main_requests(self) -> list[Any]:
        """The requests of the conversation itself, not the CLI's side requests."""
        return [request for request in self.requests if request.is_main]

    def all_bodies_text(self) -> str:
        return "\n".join(request.raw.decode("utf-8", "replace") for request in self.requests)

    def _id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_scripted_{next(self._ids):04d}"

    def _record(self, request: Any) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError
