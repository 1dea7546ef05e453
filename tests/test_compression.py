"""virgo.compression where LZ4 is not there: the migrations that ask for it change nothing.

The real server's answer (Debian's PostgreSQL has LZ4) is tested in tests/test_postgres.py; a
server built without it, or SQLite, is stood in for here by a schema editor that records what it
would execute.
"""

from typing import Any

from virgo.compression import compress_with_lz4


class RecordingCursor:
    def __init__(self, row: tuple[bool] | None) -> None:
        self.row = row

    def __enter__(self) -> "RecordingCursor":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str) -> None:
        assert "pg_settings" in sql

    def fetchone(self) -> tuple[bool] | None:
        return self.row


class RecordingConnection:
    def __init__(self, vendor: str, row: tuple[bool] | None) -> None:
        self.vendor = vendor
        self.row = row
        self.asked = False

    def cursor(self) -> RecordingCursor:
        self.asked = True
        return RecordingCursor(self.row)


class RecordingSchemaEditor:
    def __init__(self, vendor: str, row: tuple[bool] | None = None) -> None:
        self.connection = RecordingConnection(vendor, row)
        self.executed: list[str] = []

    def quote_name(self, name: str) -> str:
        return f'"{name}"'

    def execute(self, sql: str) -> None:
        self.executed.append(sql)


def run(operation: Any, editor: RecordingSchemaEditor, *, backwards: bool = False) -> list[str]:
    code = operation.reverse_code if backwards else operation.code
    code(None, editor)
    return editor.executed


def test_a_postgresql_without_lz4_keeps_its_compression() -> None:
    """Decision 252: a server whose default_toast_compression offers no lz4 (or that has no such
    setting) is left as it is, both ways, where it would otherwise fail the migration."""
    operation = compress_with_lz4("cards_publishedcard", "body", "payload")
    assert run(operation, RecordingSchemaEditor("postgresql", (False,))) == []
    assert run(operation, RecordingSchemaEditor("postgresql", None)) == []
    assert run(operation, RecordingSchemaEditor("postgresql", (False,)), backwards=True) == []


def test_sqlite_is_never_asked() -> None:
    """Decision 252: SQLite has no compression setting; nothing is asked or executed."""
    operation = compress_with_lz4("cards_publishedcard", "body")
    editor = RecordingSchemaEditor("sqlite", (True,))
    assert run(operation, editor) == []
    assert not editor.connection.asked


def test_a_postgresql_with_lz4_sets_each_column_and_sets_it_back() -> None:
    """Decision 252: with LZ4 offered, each named column is set to it, and back to pglz when the
    migration is reversed."""
    operation = compress_with_lz4("cards_publishedcard", "body", "payload")
    assert run(operation, RecordingSchemaEditor("postgresql", (True,))) == [
        'ALTER TABLE "cards_publishedcard" ALTER COLUMN "body" SET COMPRESSION lz4',
        'ALTER TABLE "cards_publishedcard" ALTER COLUMN "payload" SET COMPRESSION lz4',
    ]
    assert run(operation, RecordingSchemaEditor("postgresql", (True,)), backwards=True) == [
        'ALTER TABLE "cards_publishedcard" ALTER COLUMN "body" SET COMPRESSION pglz',
        'ALTER TABLE "cards_publishedcard" ALTER COLUMN "payload" SET COMPRESSION pglz',
    ]
