"""A persona's published card locked from another connection, and whether a backend waits on it
(PostgreSQL's pg_stat_activity): how a test holds a fan-out batch before it writes its cards."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from cards.models import PublishedCard
from personas.models import Persona
from tests.live import DEADLINE_SECONDS


@contextmanager
def card_row_held(persona: Persona) -> Iterator[None]:
    """Lock the persona's published card in another connection and keep the lock.

    A fan-out batch that gets as far as publishing its cards waits on this row: after its
    recompute and its stamps have committed, before any of its cards is written.
    """
    locked = threading.Event()
    release = threading.Event()
    failure: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                PublishedCard.objects.select_for_update().get(persona=persona)
                locked.set()
                release.wait(DEADLINE_SECONDS)
        except BaseException as exc:
            failure.append(exc)
            locked.set()
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    locked.wait(DEADLINE_SECONDS)
    assert not failure, failure
    try:
        yield
    finally:
        release.set()
        thread.join(DEADLINE_SECONDS)


def a_backend_waits_to_publish_cards() -> bool:
    table = PublishedCard._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            [f'SELECT %FROM "{table}"%FOR UPDATE%'],
        )
        (waiting,) = cursor.fetchone()
    return waiting > 0
