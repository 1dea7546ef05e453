"""What the card import tests share (issue 16, VX-IMP-1): the fixture cards, the draft's class
and address, a real HTTP server on loopback serving a card, and the admin's import page."""

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.test import Client

from personas.models import PersonaClass

CARDS = Path(__file__).parent / "fixtures" / "cards"
V1 = CARDS / "v1.json"
V03 = CARDS / "v0.3.json"
CLASS = PersonaClass.CODER_DEPUTY
ADDRESS = "work/core/imported"


class CardServer:
    """A real HTTP server on 127.0.0.1 serving a card, or something that is not one."""

    def __init__(
        self,
        body: bytes,
        *,
        length: bool = True,
        delay: float = 0,
        content_type: str | None = "application/json",
    ) -> None:
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.paths.append(self.path)
                served.hosts.append(self.headers.get("Host", ""))
                time.sleep(delay)
                self.send_response(200)
                if content_type is not None:
                    self.send_header("Content-Type", content_type)
                if length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # The client hangs up on a body too large or too slow: that is the test.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.paths: list[str] = []
        self.hosts: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "CardServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def admin_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


FROM_CARD = "/admin/personas/persona/from-card/"
