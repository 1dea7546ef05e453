"""What a launcher hands an agent CLI, on the installation or on an agent host without it: the
loopback MCP server the agent calls (its tools are served from outside the agent), the
owner-private files that name that server, and the environment the agent may see.

Nothing here reads Django's settings or the database: `virgo launch` (serving.launcher) and
`python -m serving.remote_launch` (an agent host holding a token only, VX-REMOTE-3) use the same
pieces.
"""

import json
import os
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serving.agent_clis import MCP_SERVER_NAME

if TYPE_CHECKING:
    # Imported where a server is built: the admin reads LOOPBACK_HOSTS from here at every
    # command's start, and the SDK's types take a third of a second to import.
    from mcp.server.lowlevel import Server

LOOPBACK = "127.0.0.1"
QUIET_LOGGERS = ("uvicorn", "uvicorn.error", "mcp", "httpx")

# The basics every CLI expects: where programs are, who the user is, the locale and the terminal.
# Nothing here configures Virgo or carries a credential (SSH_AUTH_SOCK, proxies with passwords
# and the like pass only when the operator lists them). HOME is the agent's own (agent_home).
AGENT_ENV_NAMES = frozenset(
    {
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "TZ",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
    }
)
AGENT_ENV_PREFIXES = ("LC_",)


def visible_environment(environ: Mapping[str, str], passed: frozenset[str]) -> dict[str, str]:
    """The part of `environ` an agent may see: the basics, and the names the operator passes."""
    allowed = AGENT_ENV_NAMES | passed
    return {
        name: value
        for name, value in environ.items()
        if name in allowed or name.startswith(AGENT_ENV_PREFIXES)
    }


def write_private(path: Path, text: str) -> Path:
    """Write `text` owner-private and atomically: a launch never reads half a file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def write_private_json(path: Path, document: dict[str, Any]) -> Path:
    return write_private(path, json.dumps(document, indent=2))


def remote_mcp_config(url: str, token: str) -> dict[str, Any]:
    """The MCP config naming the launch's server: its URL and this launch's token, nothing else."""
    return {
        "mcpServers": {
            MCP_SERVER_NAME: {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }


LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def http_app(
    server: "Server",
    *,
    host: str,
    port: int,
    token: str,
    around: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
) -> Any:
    """Streamable HTTP at /mcp for loopback clients holding the bearer token.

    Loopback alone would let any local process act as the persona, so every request must carry
    `Authorization: Bearer <token>`; Host and Origin are checked against the loopback address
    (DNS rebinding protection of the SDK). `around` is entered on the server's own event loop
    for as long as it runs (the agent host's session with the remote endpoint).
    """
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=TransportSecuritySettings(
            allowed_hosts=[authority, f"localhost:{port}"],
            allowed_origins=[f"http://{authority}", f"http://localhost:{port}"],
        ),
    )

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with around() if around is not None else nullcontext(), manager.run():
            yield

    gate = _BearerGate(manager, token)
    return Starlette(routes=[Route("/mcp", endpoint=gate)], lifespan=lifespan)


class _BearerGate:
    """An ASGI app (an instance, so Starlette routes raw ASGI to it) that checks the token."""

    def __init__(self, manager: Any, token: str) -> None:
        self.manager = manager
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        headers = dict(scope.get("headers") or [])
        if not secrets.compare_digest(headers.get(b"authorization", b""), self.expected):
            response = JSONResponse({"error": "a valid bearer token is required"}, status_code=401)
            await response(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)


class LoopbackServer:
    """An MCP server for one launch: streamable HTTP on a loopback port bound here (no other
    process can take it between choosing and binding), answering one token made for the launch,
    in a thread of the launcher."""

    def __init__(
        self, server: "Server", around: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    ) -> None:
        self.server = server
        self.around = around
        self.token = secrets.token_urlsafe(32)
        self.socket = socket.create_server((LOOPBACK, 0))
        self.port: int = self.socket.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{self.port}/mcp"
        self._uvicorn: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import logging

        import uvicorn

        app = http_app(
            self.server, host=LOOPBACK, port=self.port, token=self.token, around=self.around
        )
        # The agent's terminal is the launcher's: the server says only what went wrong.
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._uvicorn.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self._thread.start()
        while not self._uvicorn.started:
            if not self._thread.is_alive():
                raise RuntimeError("the persona's MCP server did not start")
            threading.Event().wait(0.01)

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()
