"""Freeze what a generation is, in the database itself, as 0002 froze its stored stamp.

A generation's persona, number, composition and base composition hash never change; its stamp
hash and composition hash are written once (empty until its stamp is stored: the first set
stays possible) and never changed after. The runtime verifies a stamp file against the
immutable stamp row, not these columns, so this is the second guard, for every other reader of
them (cards, coordination envelopes, snapshots, the admin).

On SQLite a migration that remakes personas_generation (Django's way of altering a column
there) drops these triggers with the old table: such a migration must create them again. The
tests that send raw SQL (tests/test_stamp_frozen.py) notice a missing one.
"""

from django.db import migrations

IMMUTABLE = (
    "generations are immutable: persona, number, composition and base composition hash never change"
)
SET_ONCE = "generation stamp and composition hashes are set once: UPDATE of a set hash refused"

SQLITE_FORWARD = [
    f"""
    CREATE TRIGGER personas_generation_immutable
    BEFORE UPDATE ON personas_generation
    WHEN NEW.persona_id IS NOT OLD.persona_id
        OR NEW.number IS NOT OLD.number
        OR NEW.composition IS NOT OLD.composition
        OR NEW.base_composition_hash IS NOT OLD.base_composition_hash
    BEGIN
        SELECT RAISE(ABORT, '{IMMUTABLE}');
    END
    """,
    f"""
    CREATE TRIGGER personas_generation_hashes_set_once
    BEFORE UPDATE ON personas_generation
    WHEN (OLD.stamp_hash <> '' AND NEW.stamp_hash IS NOT OLD.stamp_hash)
        OR (OLD.composition_hash <> '' AND NEW.composition_hash IS NOT OLD.composition_hash)
    BEGIN
        SELECT RAISE(ABORT, '{SET_ONCE}');
    END
    """,
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS personas_generation_immutable",
    "DROP TRIGGER IF EXISTS personas_generation_hashes_set_once",
]

POSTGRESQL_FORWARD = [
    f"""
    CREATE OR REPLACE FUNCTION personas_generation_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.persona_id IS DISTINCT FROM OLD.persona_id
            OR NEW.number IS DISTINCT FROM OLD.number
            OR NEW.composition IS DISTINCT FROM OLD.composition
            OR NEW.base_composition_hash IS DISTINCT FROM OLD.base_composition_hash
        THEN
            RAISE EXCEPTION '{IMMUTABLE}'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF (OLD.stamp_hash <> '' AND NEW.stamp_hash IS DISTINCT FROM OLD.stamp_hash)
            OR (OLD.composition_hash <> ''
                AND NEW.composition_hash IS DISTINCT FROM OLD.composition_hash)
        THEN
            RAISE EXCEPTION '{SET_ONCE}'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END;
    $$
    """,
    """
    CREATE TRIGGER personas_generation_frozen
    BEFORE UPDATE ON personas_generation
    FOR EACH ROW EXECUTE FUNCTION personas_generation_refuse_change()
    """,
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS personas_generation_frozen ON personas_generation",
    "DROP FUNCTION IF EXISTS personas_generation_refuse_change()",
]

STATEMENTS = {
    "sqlite": (SQLITE_FORWARD, SQLITE_REVERSE),
    "postgresql": (POSTGRESQL_FORWARD, POSTGRESQL_REVERSE),
}


def _run(schema_editor, direction):
    vendor = schema_editor.connection.vendor
    if vendor not in STATEMENTS:
        raise RuntimeError(
            f"no generation trigger for the {vendor} database; Virgo supports SQLite and PostgreSQL"
        )
    for statement in STATEMENTS[vendor][direction]:
        schema_editor.execute(statement, params=None)


def forward(apps, schema_editor):
    _run(schema_editor, 0)


def reverse(apps, schema_editor):
    _run(schema_editor, 1)


class Migration(migrations.Migration):
    dependencies = [
        ("stamps", "0002_immutability_triggers"),
        ("personas", "0004_skill_map_revision"),
    ]
    operations = [migrations.RunPython(forward, reverse)]
