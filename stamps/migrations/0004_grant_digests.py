"""The pinned grant's digest (VX-TRUST-4): filled in for every generation already stamped, and
set once like the stamp hash beside it.

Adding the column remade personas_generation on SQLite, which drops its triggers (see 0003):
they are made again here, the set-once one now covering grant_digest too. On PostgreSQL the
trigger function is replaced; the trigger itself survives the new column.
"""

import hashlib
import hmac
import json

import rfc8785
from django.db import migrations

IMMUTABLE = (
    "generations are immutable: persona, number, composition and base composition hash never change"
)
SET_ONCE = "generation stamp and composition hashes are set once: UPDATE of a set hash refused"


def _set_once(old: str, new: str, distinct: str) -> str:
    return " OR ".join(
        f"({old}.{column} <> '' AND {new}.{column} {distinct} {old}.{column})"
        for column in ("stamp_hash", "composition_hash", "grant_digest")
    )


SQLITE_FORWARD = [
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


def _digest(body: bytes, salt: str) -> str:
    """stamps.projections.grant_digest as of this migration."""
    tools = json.loads(bytes(body)).get("tools") or []
    pairs = sorted([str(tool.get("name")), str(tool.get("access"))] for tool in tools)
    message = rfc8785.dumps({"grant": pairs, "v": 1})
    return hmac.new(bytes.fromhex(salt), message, hashlib.sha256).hexdigest()


def fill_digests(apps, schema_editor):
    Generation = apps.get_model("personas", "Generation")
    CapabilityStamp = apps.get_model("stamps", "CapabilityStamp")
    salts = dict(apps.get_model("personas", "Persona").objects.values_list("pk", "grant_salt"))
    stamped = Generation.objects.filter(grant_digest="").exclude(stamp_hash="")
    for generation in stamped.only("pk", "persona_id").iterator():
        stamp = CapabilityStamp.objects.filter(generation_id=generation.pk).first()
        if stamp is None:
            continue
        digest = _digest(stamp.body, salts[generation.persona_id])
        Generation.objects.filter(pk=generation.pk).update(grant_digest=digest)


def triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"sqlite": SQLITE_FORWARD, "postgresql": POSTGRESQL_FORWARD}.get(vendor)
    if statements is None:
        raise RuntimeError(
            f"no generation trigger for the {vendor} database; Virgo supports SQLite and PostgreSQL"
        )
    for statement in statements:
        schema_editor.execute(statement, params=None)


def previous_triggers(apps, schema_editor):
    from importlib import import_module

    frozen = import_module("stamps.migrations.0003_frozen_generation_hashes")
    frozen.reverse(apps, schema_editor)
    frozen.forward(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("stamps", "0003_frozen_generation_hashes"),
        ("personas", "0007_grant_salt_and_digest"),
    ]
    operations = [
        migrations.RunPython(fill_digests, migrations.RunPython.noop),
        migrations.RunPython(triggers, previous_triggers),
    ]
