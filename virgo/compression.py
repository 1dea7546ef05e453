"""LZ4 for the large values written on every publication, where PostgreSQL has it.

A card's bytes and payload, a stamp's bytes and a generation's composition are each written
once per generation and read far more often, and all are over the size at which PostgreSQL
compresses a value. Its default, pglz, cost a third of the time of the fan-out's card writes;
LZ4 (PostgreSQL 14 and later, when built with it: Debian's is) compresses and decompresses
several times faster. Values already stored keep their compression until they are written again.
"""

from typing import Any

from django.db import migrations


def _lz4_available(schema_editor: Any) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def _set_compression(table: str, columns: tuple[str, ...], method: str) -> Any:
    def operation(apps: Any, schema_editor: Any) -> None:
        if not _lz4_available(schema_editor):
            return
        quote = schema_editor.quote_name
        for column in columns:
            schema_editor.execute(
                f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(column)} SET COMPRESSION {method}"
            )

    return operation


def compress_with_lz4(table: str, *columns: str) -> migrations.RunPython:
    """A migration operation: new values of these columns are compressed with LZ4; elsewhere
    (SQLite, a PostgreSQL without LZ4) it does nothing."""
    return migrations.RunPython(
        _set_compression(table, columns, "lz4"), _set_compression(table, columns, "pglz")
    )
