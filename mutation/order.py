"""A pytest plugin for mutmut's runs (pyproject.toml loads it): tests without a database first.

mutmut stops a mutant's run at the first failing test, so a mutant the quick unit tests catch
is done before the test database is even migrated. The order is stable otherwise, and the suite
does not depend on it (it also runs spread over processes).

mutmut also runs pytest several times in one process (the stats pass, then the clean run), each
session on a new test database; the plugin empties Django's content type cache at each start.
"""

import pytest
from django.apps import apps

_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def _needs_database(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(fixtures & _DATABASE_FIXTURES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_needs_database)


def pytest_sessionstart(session: pytest.Session) -> None:
    # The last session's database numbered the content types differently: a cached id would be
    # a foreign key to nothing (the admin log's, say) and fail a test that is not broken.
    if apps.ready:
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()
