"""Writing the same columns of many rows back, each with its own values, in one statement.

QuerySet.bulk_update does this with one CASE WHEN per row and column, and building those
expressions costs more than the writes: profiled in the recompute fan-out, ~2.5 ms of Python per
persona for five columns. Here the statement is built once and the driver sends it with every
row's values (executemany; psycopg pipelines it into one round trip).
"""

from collections.abc import Sequence

from django.db import connections, router
from django.db.models import Model


def update_each(objects: Sequence[Model], fields: Sequence[str]) -> None:
    """Save `fields` of each object to its row, values prepared exactly as save() prepares them.

    No signals are sent and auto_now fields are not touched, as with bulk_update. A model whose
    columns are guarded declares `check_writes(objects, fields)` (personas.Generation), called
    here first, as its save() and QuerySet.update() do.
    """
    if not objects:
        return
    model = type(objects[0])
    check_writes = getattr(model, "check_writes", None)
    if check_writes is not None:
        check_writes(objects, fields)
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    columns = [meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column.column)} = %s" for column in columns)
    statement = (
        f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    )
    rows = [
        [column.get_db_prep_save(getattr(obj, column.attname), connection) for column in columns]
        + [meta.pk.get_db_prep_value(obj.pk, connection)]
        for obj in objects
    ]
    with connection.cursor() as cursor:
        cursor.executemany(statement, rows)
