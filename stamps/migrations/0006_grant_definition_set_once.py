"""The grant definition a digest covers (personas 0011) is set once with the digest: the
set-once trigger now covers it too. Adding the column may remake personas_generation on SQLite,
which drops its triggers, so both are made again here, as 0004 made them plus the new column.
Generations stamped before it keep a blank definition: their digests cover the first one."""

from django.db import migrations

IMMUTABLE = (
    "generations are immutable: persona, number, composition and base composition hash never change"
)
SET_ONCE = "generation stamp and composition hashes are set once: UPDATE of a set hash refused"
SET_ONCE_COLUMNS = ("stamp_hash", "composition_hash", "grant_digest", "grant_definition")


def _set_once(old: str, new: str, distinct: str) -> str:
    return " OR ".join(
        f"({old}.{column} <> '' AND {new}.{column} {distinct} {old}.{column})"
        for column in SET_ONCE_COLUMNS
    )


SQLITE = [
    "DROP TRIGGER IF EXISTS personas_generation_immutable",
    "DROP TRIGGER IF EXISTS personas_generation_hashes_set_once",
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
    WHEN {_set_once("OLD", "NEW", "IS NOT")}
    BEGIN
        SELECT RAISE(ABORT, '{SET_ONCE}');
    END
    """,
]

POSTGRESQL = [
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
        IF {_set_once("OLD", "NEW", "IS DISTINCT FROM")}
        THEN
            RAISE EXCEPTION '{SET_ONCE}'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END;
    $$
    """,
]


def triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"sqlite": SQLITE, "postgresql": POSTGRESQL}.get(vendor)
    if statements is None:
        raise RuntimeError(
            f"no generation trigger for the {vendor} database; Virgo supports SQLite and PostgreSQL"
        )
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("stamps", "0005_generation_triggers_after_revocation"),
        ("personas", "0011_grant_definition"),
    ]
    operations = [migrations.RunPython(triggers, migrations.RunPython.noop)]
