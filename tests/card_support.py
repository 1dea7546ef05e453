"""The public card's WSGI stack for tests that call it in-process."""

import io
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from cards import fastpath
from cards.rendering import IDENTITY_EXTENSION


@pytest.fixture
def card_app() -> Iterator[fastpath.PublicCardFastPath]:
    """virgo.wsgi's stack (the card fast path in front of Django) inside the test's transaction:
    the request signals would otherwise close the test's own connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield fastpath.PublicCardFastPath(WSGIHandler())
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def extension(card: dict[str, Any], uri: str) -> dict[str, Any]:
    """The card's one extension with this URI (a test fails if there is none or several)."""
    found = [e for e in card["capabilities"]["extensions"] if e["uri"] == uri]
    assert len(found) == 1, f"{len(found)} extensions {uri} on the card"
    return found[0]


def identity_extension(card: dict[str, Any]) -> dict[str, Any]:
    return extension(card, IDENTITY_EXTENSION)


Answer = tuple[int, dict[str, str], bytes]


def call(
    app: Any,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str | None] | None = None,
    address: str = "198.51.100.7",
    scheme: str = "http",
    server_name: str = "testserver",
) -> Answer:
    """The app's answer to a request; `headers` may set Host to None to send none."""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": server_name,
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "testserver",
        "REMOTE_ADDR": address,
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
    }
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        # WSGI names the body's length and type without the HTTP_ prefix (PEP 3333).
        key = key if key in ("CONTENT_LENGTH", "CONTENT_TYPE") else "HTTP_" + key
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    answered: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        answered["status"] = int(status.split()[0])
        answered["headers"] = dict(response_headers)

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return answered["status"], answered["headers"], body
