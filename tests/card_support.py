"""The public card's WSGI stack for tests that call it in-process."""

from collections.abc import Iterator

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from cards import fastpath


@pytest.fixture
def card_app() -> Iterator[fastpath.PublicCardFastPath]:
    """virgo.wsgi's stack (the card fast path in front of Django) inside the test's transaction:
    the request signals would otherwise close the test's own connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield fastpath.PublicCardFastPath(WSGIHandler())
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
