"""A pytest plugin for mutmut's runs (pyproject.toml loads it): tests without a database first.

mutmut stops a mutant's run at the first failing test, so a mutant the quick unit tests catch
is done before the test database is even migrated. The order is stable otherwise, and the suite
does not depend on it (it also runs spread over processes).
"""

import pytest

_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def _needs_database(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(fixtures & _DATABASE_FIXTURES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_needs_database)
