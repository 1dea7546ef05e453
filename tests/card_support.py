"""The public card's WSGI stack for tests that call it in-process."""

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
