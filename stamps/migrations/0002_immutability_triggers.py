"""Make stored stamps immutable in the database itself, whatever client writes to it.

UPDATE is always refused. DELETE is refused while the stamp's generation exists, so a stamp
disappears only after its generation (stamps.signals removes it then). PostgreSQL's TRUNCATE
is left alone on purpose: it is a whole-table administrative reset (test flushes use it), not a
row change.
"""

from django.db import migrations

SQLITE_FORWARD = [
    """
    CREATE TRIGGER stamps_capabilitystamp_no_update
    BEFORE UPDATE ON stamps_capabilitystamp
    BEGIN
        SELECT RAISE(ABORT, 'capability stamps are immutable: UPDATE refused');
    END
    """,
    """
    CREATE TRIGGER stamps_capabilitystamp_no_delete
    BEFORE DELETE ON stamps_capabilitystamp
    WHEN EXISTS (SELECT 1 FROM personas_generation WHERE id = OLD.generation_id)
    BEGIN
        SELECT RAISE(ABORT, 'capability stamps are immutable: DELETE refused while the generation exists');
    END
    """,
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS stamps_capabilitystamp_no_update",
    "DROP TRIGGER IF EXISTS stamps_capabilitystamp_no_delete",
]

POSTGRESQL_FORWARD = [
    """
    CREATE OR REPLACE FUNCTION stamps_capabilitystamp_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' AND NOT EXISTS (
            SELECT 1 FROM personas_generation WHERE id = OLD.generation_id
        ) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'capability stamps are immutable: % refused', TG_OP
            USING ERRCODE = 'integrity_constraint_violation';
    END;
    $$
    """,
    """
    CREATE TRIGGER stamps_capabilitystamp_immutable
    BEFORE UPDATE OR DELETE ON stamps_capabilitystamp
    FOR EACH ROW EXECUTE FUNCTION stamps_capabilitystamp_refuse_change()
    """,
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS stamps_capabilitystamp_immutable ON stamps_capabilitystamp",
    "DROP FUNCTION IF EXISTS stamps_capabilitystamp_refuse_change()",
]

STATEMENTS = {
    "sqlite": (SQLITE_FORWARD, SQLITE_REVERSE),
    "postgresql": (POSTGRESQL_FORWARD, POSTGRESQL_REVERSE),
}


def _run(schema_editor, direction):
    vendor = schema_editor.connection.vendor
    if vendor not in STATEMENTS:
        raise RuntimeError(
            f"no immutability trigger for the {vendor} database; Virgo supports "
            "SQLite and PostgreSQL"
        )
    for statement in STATEMENTS[vendor][direction]:
        # No parameters: the PL/pgSQL body uses % as its own format marker.
        schema_editor.execute(statement, params=None)


def forward(apps, schema_editor):
    _run(schema_editor, 0)


def reverse(apps, schema_editor):
    _run(schema_editor, 1)


class Migration(migrations.Migration):
    dependencies = [("stamps", "0001_initial")]
    operations = [migrations.RunPython(forward, reverse)]
