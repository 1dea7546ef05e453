"""How each of Virgo's processes starts: its settings first, and a setting it cannot use is one
line with status 2 (VX-OPS-2).

A missing or bad setting (virgo.settings raises ImproperlyConfigured naming the variable, what is
wrong and the fix) ends `virgo <command>`, `manage.py`, `virgo-web`, a Celery worker and beat, and
so `make serve`, with that one line on stderr, prefixed with the program's name, and exit status
2: never a traceback, whose last line is the only one an operator needs. Status 2 also tells a
supervisor (`make serve`, virgo.supervise) that starting the process again cannot help.

The settings are loaded before anything else runs: Django's command line would otherwise swallow
the error into "Unknown command" (an app's command is unknown while settings fail), and Celery's
into the traceback of a command-line option.

A database `virgo <command>` cannot use ends it the same way (VX-OPS-7): one that cannot be
reached, or one not migrated, whatever the command was doing when it found out. The error is
caught here, around every command, and diagnosed afresh (a new connection, then the migration
plan), so that a database error of any other cause keeps its traceback: that one is a bug.
"""

import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.dispatch import Signal

EXIT_MISCONFIGURED = 2

# Sent by virgo-web once Django is set up, before it binds: the apps connect the checks a web
# server must pass first (stamps.checks.start_checks), as they connect Celery's worker_init for
# a worker; a receiver that raises keeps the server from starting.
web_starting = Signal()


def exit_misconfigured(program: str, error: Exception | str) -> NoReturn:
    # One line whatever the message holds: a log reader or a supervisor sees all of it.
    message = " ".join(str(error).split())
    print(f"{program}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_MISCONFIGURED)


def database_problem() -> str | None:
    """Why the default database cannot serve this process, with the fix; None if it can."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    connection = connections[DEFAULT_DB_ALIAS]
    database = connection.settings_dict
    where = (
        database["NAME"]
        if connection.vendor == "sqlite"
        else f"{database['HOST'] or 'localhost'}:{database['PORT'] or 'default port'}/"
        f"{database['NAME']}"
    )
    # The connection that failed may be left unusable; the diagnosis starts from a new one.
    connection.close()
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        # The driver's first line says what failed (refused, unknown host, bad password);
        # the rest is its advice, which the fix replaces.
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        fix = (
            "make its directory and let this user write there, or set DATABASE_URL to another file"
            if connection.vendor == "sqlite"
            else "start it, or set DATABASE_URL to a database that answers"
        )
        return f"cannot reach the database {where} ({reason}): {fix}"
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if unapplied:
        return (
            f"the database {where} is not migrated ({len(unapplied)} migrations not applied): "
            "run `manage.py migrate`"
        )
    return None


def load_settings(program: str) -> None:
    """Import Django's settings now, so that a setting they refuse ends `program` in one line."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018  (the first access imports the settings module)
    except ImproperlyConfigured as error:
        exit_misconfigured(program, error)


def run_management(
    program: str, argv: Sequence[str], execute: Callable[[list[str]], None] | None = None
) -> None:
    """A management command line (`manage.py`: Django's; `virgo`: `execute`, Virgo's own), its
    configuration and database errors in one line."""
    load_settings(program)
    from django.core.management import execute_from_command_line

    try:
        if execute is None:
            execute_from_command_line([program, *argv])
        else:
            execute(list(argv))
    except ImproperlyConfigured as error:
        exit_misconfigured(program, error)
    except DatabaseError:
        problem = database_problem()
        if problem is None:
            raise
        exit_misconfigured(program, problem)
