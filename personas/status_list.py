"""What the revocation status list is rendered from (VX-TRUST-7): reads only, each one query.

The list itself (its bits, encoding, signature and endpoint) is the cards app's
(cards.status_list); the records say which indexes exist, which are revoked, and when that
last changed (personas.services.status_list writes it).
"""

from collections.abc import Iterable
from typing import NamedTuple

from django.db import connection

from personas.models import StatusListEntry, StatusListVersion

# The one row of StatusListVersion (made by migration personas 0015, or by the first change).
VERSION_ROW = 1


class ListState(NamedTuple):
    """What decides the list's bytes: the version (0 before any change) and the highest index
    given out (0 before any generation), which sets the list's length."""

    version: int
    highest_index: int


def list_state() -> ListState:
    """The version and the highest index in one query: both are single-row index lookups,
    whatever the number of personas, and a request for the list makes only this one."""
    quote = connection.ops.quote_name
    versions, entries = StatusListVersion._meta, StatusListEntry._meta
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT {quote('version')} FROM {quote(versions.db_table)} "
            f"WHERE {quote(versions.pk.column)} = %s), "
            f"(SELECT MAX({quote(entries.pk.column)}) FROM {quote(entries.db_table)})",
            [VERSION_ROW],
        )
        version, highest = cursor.fetchone()
    return ListState(version or 0, highest or 0)


def revoked_indexes() -> list[int]:
    """Every revoked index, from the partial index on revoked entries (one query)."""
    return list(
        StatusListEntry.objects.filter(revoked_at__isnull=False)
        .order_by("index")
        .values_list("index", flat=True)
    )


def status_indexes(generation_ids: Iterable[int]) -> dict[int, int]:
    """The index of each of these generations, by generation id (one query)."""
    return dict(
        StatusListEntry.objects.filter(generation__in=list(generation_ids)).values_list(
            "generation_id", "index"
        )
    )
