"""Writing the same columns of many rows back, each with its own values, in one statement.

QuerySet.bulk_update does this with one CASE WHEN per row and column, and building those
expressions costs more than the writes: profiled in the recompute fan-out, ~2.5 ms of Python per
persona for five columns. Here the statement is built once. On PostgreSQL every column's values
go as one binary array parameter and the server joins them back to their rows (UPDATE ... FROM
unnest): one statement, planned and executed once for the batch. Elsewhere the driver sends the
statement with every row's values (executemany).
"""

from collections.abc import Sequence

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model


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
    rows = [
        [column.get_db_prep_save(getattr(obj, column.attname), connection) for column in columns]
        + [meta.pk.get_db_prep_value(obj.pk, connection)]
        for obj in objects
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                _unnest_update(meta.db_table, [*columns, meta.pk], connection), _by_column(rows)
            )
        else:
            cursor.executemany(_update_by_pk(meta.db_table, columns, meta.pk, connection), rows)


def _update_by_pk(
    table: str,
    columns: Sequence[Field],
    pk: Field,
    connection: BaseDatabaseWrapper,
) -> str:
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column.column)} = %s" for column in columns)
    return f"UPDATE {quote(table)} SET {assignments} WHERE {quote(pk.column)} = %s"


def _unnest_update(table: str, columns: Sequence[Field], connection: BaseDatabaseWrapper) -> str:
    """UPDATE of `table` from one array per column, the primary key's last."""
    quote = connection.ops.quote_name
    *written, pk = columns
    names = [f"c{index}" for index in range(len(columns))]
    # Cast to the type without its modifier: an explicit cast to varchar(64) would cut a longer
    # value silently, where the assignment to the column refuses it, as a plain UPDATE does.
    # Each array goes in binary (%b): in text every string and byte value is quoted and escaped
    # by a regular expression, which was half the statement's time for a batch of cards.
    arrays = ", ".join(f"%b::{column.db_type(connection).split('(')[0]}[]" for column in columns)
    assignments = ", ".join(
        f"{quote(column.column)} = v.{name}" for column, name in zip(written, names, strict=False)
    )
    return (
        f"UPDATE {quote(table)} SET {assignments} "
        f"FROM unnest({arrays}) AS v({', '.join(names)}) "
        f"WHERE {quote(table)}.{quote(pk.column)} = v.{names[-1]}"
    )


def _by_column(rows: Sequence[Sequence[object]]) -> list[list[object]]:
    return [list(values) for values in zip(*rows, strict=True)]
