"""A pytest plugin for mutmut's runs (pyproject.toml loads it): tests without a database first.

mutmut stops a mutant's run at the first failing test, so a mutant the quick unit tests catch
is done before the test database is even migrated. The order is stable otherwise, and the suite
does not depend on it (it also runs spread over processes).

mutmut also runs pytest several times in one process (the stats pass, then the clean run), each
session on a new test database; the plugin empties Django's content type cache at each start.
"""

import itertools

import pytest
from django.apps import apps

_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def _needs_database(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(fixtures & _DATABASE_FIXTURES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_needs_database)


_sessions = itertools.count(1)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not apps.ready:
        return
    # The last session's database numbered the content types differently: a cached id would be
    # a foreign key to nothing (the admin log's, say) and fail a test that is not broken.
    from django.contrib.contenttypes.models import ContentType
    from django.db import connections

    ContentType.objects.clear_cache()
    # An in-memory SQLite test database lives while any connection to it is open, and a thread
    # of the last session may still hold one: the next session would find it migrated, with the
    # rows its migrations load (the default skill map) flushed by the last transactional test.
    # Each session gets a database of its own name instead.
    session_number = next(_sessions)
    for connection in connections.all():
        if connection.vendor == "sqlite":
            name = f"file:mutation-{connection.alias}-{session_number}?mode=memory&cache=shared"
            connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    # The readyz pool's threads keep their own connection objects, named for the last session's
    # database: the next session starts new threads.
    from virgo import health

    with health._pool_lock:
        if health._pool is not None:
            health._pool.shutdown(wait=True)
            health._pool = None
    health.BACKLOG.forget()
