"""Remove a stamp row once its generation is gone.

The database refuses to delete a stamp while its generation exists, and the ORM refuses stamp
deletes altogether, so this is the one place a stamp row leaves: right after the row of its
generation was deleted (a persona deleted with its generations), inside the same transaction.
The stamp file stays where it is; files are never rewritten or removed by Virgo.
"""

from typing import Any

from django.db import connections

from personas.models import Generation
from stamps.models import CapabilityStamp


def remove_stamp_of_deleted_generation(
    sender: type[Generation], instance: Generation, using: str, **kwargs: Any
) -> None:
    table = connections[using].ops.quote_name(CapabilityStamp._meta.db_table)
    with connections[using].cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE generation_id = %s", [instance.pk])
