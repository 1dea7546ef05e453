"""Fixtures every test gets: a private VIRGO_HOME, an empty per-process cache, no remembered
outage, and stamp rows that never block a flush.

Building a generation writes its stamp file under VIRGO_HOME, so each test gets its own.
The per-process cache holds rate-limit counts (a card read from the test client's one address
counts against 60 a minute) and card tokens: an earlier test on the same worker must not decide
this one's answer. A shared cache (Redis, which the workers share) is left alone: a test that
uses one keys its own. So is an outage the process remembers (virgo.outages: a cache that
failed is not tried again for a few seconds): a test that broke its cache must not leave the
next test's sign-in answering 503, also when pytest runs again in the same process (mutmut).
Stored stamps refuse deletion while their generation exists (a database trigger), and a
transactional test ends with a flush that deletes tables in no fixed order; deleting the
generations first (their stamps follow, stamps.signals) lets that flush always succeed.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache

from virgo.outages import BROKER, DATABASE, SHARED_CACHE


@pytest.fixture(autouse=True)
def empty_local_cache() -> None:
    cache = caches["default"]
    if isinstance(cache, LocMemCache):
        cache.clear()


@pytest.fixture(autouse=True)
def no_remembered_outage() -> None:
    for outage in (SHARED_CACHE, BROKER, DATABASE):
        outage.forget()


@pytest.fixture(autouse=True)
def virgo_home(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.VIRGO_HOME = tmp_path / "virgo-home"
    return settings.VIRGO_HOME


def _transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    if marker is not None and (
        marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")
    ):
        return True
    return bool({"transactional_db", "live_server"} & set(request.fixturenames))


@pytest.fixture(autouse=True)
def _stamps_removed_before_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    if not _transactional(request):
        yield
        return
    # Requested here so that this teardown runs before the database's flush.
    request.getfixturevalue("transactional_db")
    yield
    from personas.models import Generation
    from virgo import health

    # A /readyz probe leaves its backlog count running on a thread of its own; on SQLite's
    # shared in-memory database its read would lock the tables the flush empties.
    health.BACKLOG.settle(timeout=30)
    Generation.objects.all().delete()
