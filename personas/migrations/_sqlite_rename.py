"""For migrations that remake personas_generation on SQLite (adding a column or constraint).

SQLite remakes a table by creating `new__<table>`, dropping the old one and renaming the new
one into place. Since SQLite 3.26 the rename re-checks every trigger that names the table, and
the stamps app's trigger on stamps_capabilitystamp (stamps 0002) names personas_generation,
which is gone at that moment: the rename fails. With legacy_alter_table on, the rename leaves
other triggers alone; they name the table by name and find the new one. (The table's own
triggers go with the old table; stamps migrations make them again.)
"""

from collections.abc import Callable
from typing import Any

from django.db import migrations


def _set(on: bool) -> Callable[[Any, Any], None]:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(f"PRAGMA legacy_alter_table = {'ON' if on else 'OFF'}")

    return run


def around(operations: list[Any]) -> list[Any]:
    """`operations` with legacy_alter_table on during them, both ways, on SQLite only."""
    return [
        migrations.RunPython(_set(True), _set(False)),
        *operations,
        migrations.RunPython(_set(False), _set(True)),
    ]
