"""A pytest plugin for mutmut's runs (pyproject.toml loads it): tests without a database first.

mutmut stops a mutant's run at the first failing test, so a mutant the quick unit tests catch
is done before the test database is even migrated. The order is stable otherwise, and the suite
does not depend on it (it also runs spread over processes).

mutmut also runs pytest several times in one process (the stats pass, then the clean run), each
session on a new test database; the plugin empties Django's content type cache at each start.

Migrating a test database takes about 4.5 s, most of a mutant's run when its first test fails
at once: the first session of a run keeps its freshly migrated database as a file, and every
later session of that run copies the file in (SQLite's backup, milliseconds) instead.
"""

import contextlib
import itertools
import os
import sqlite3
from pathlib import Path
from typing import Any

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


def _template() -> Path:
    # mutmut forks the clean run, the stats pass and every mutant's run from one process: its
    # id names this run's template, so a run never restores a database an older code migrated.
    return Path.cwd() / f".mutation-test-database-{os.getppid()}.sqlite3"


def _create_from_template(creation: Any, original: Any, *args: Any, **kwargs: Any) -> str:
    template = _template()
    if not template.exists():
        name = original(creation, *args, **kwargs)
        partial = template.with_suffix(f".{os.getpid()}")
        with contextlib.closing(sqlite3.connect(partial)) as copy:
            creation.connection.connection.backup(copy)
        partial.replace(template)
        return name
    from django.conf import settings

    connection = creation.connection
    name = creation._get_test_db_name()
    connection.close()
    settings.DATABASES[connection.alias]["NAME"] = name
    connection.settings_dict["NAME"] = name
    connection.ensure_connection()
    with contextlib.closing(sqlite3.connect(template)) as source:
        source.backup(connection.connection)
    return name


def keep_mutant_under_test() -> None:
    """Hold the mutant under test in the process as well as in MUTANT_UNDER_TEST: a test that
    empties os.environ (the launcher's do, to decide exactly what an agent sees) would otherwise
    run the original code, and its mutants would survive unseen. mutmut's own runner does this;
    mutation.run's (for MUTATION_TESTS) starts pytest with the variable alone."""
    mutant = os.environ.get("MUTANT_UNDER_TEST")
    if not mutant:
        return
    try:
        from mutmut.mutation.trampoline import set_mutant_under_test
    except ImportError:
        return  # no mutmut, no trampoline to tell: the runner's own tests run such sessions
    set_mutant_under_test(mutant)


def pytest_configure(config: pytest.Config) -> None:
    from django.db.backends.sqlite3.creation import DatabaseCreation

    keep_mutant_under_test()

    original = DatabaseCreation.create_test_db
    if getattr(original, "from_template", False):
        return

    def create_test_db(self: Any, *args: Any, **kwargs: Any) -> str:
        return _create_from_template(self, original, *args, **kwargs)

    create_test_db.from_template = True  # type: ignore[attr-defined]
    DatabaseCreation.create_test_db = create_test_db
