"""What the card import tests share (issue 16, VX-IMP-1): the fixture cards, the draft's class
and address, a real HTTP server on loopback serving a card, and the admin's import page."""

import time
from pathlib import Path
from typing import Any

from django.test import Client

from personas.models import PersonaClass
from tests.loopback_http import LoopbackServer, QuietHandler

CARDS = Path(__file__).parent / "fixtures" / "cards"
V1 = CARDS / "v1.json"
V03 = CARDS / "v0.3.json"
CLASS = PersonaClass.CODER_DEPUTY
ADDRESS = "work/core/imported"


class CardServer(LoopbackServer):
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

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                served.paths.append(self.path)
                served.hosts.append(self.headers.get("Host", ""))
                time.sleep(delay)
                if length:
                    return self.send(200, body, content_type)
                self.send_response(200)
                if content_type is not None:
                    self.send_header("Content-Type", content_type)
                self.end_headers()
                self.write_body(body)

        self.paths: list[str] = []
        self.hosts: list[str] = []
        super().__init__(Handler)

    @property
    def url(self) -> str:
        return self.origin


def admin_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


FROM_CARD = "/admin/personas/persona/from-card/"
