"""Indexes for the directory's filters (personas.search).

The provider index is an ordinary expression index, on every database. The others use what
only PostgreSQL has, so they are made only there and stay out of the model state: a GIN
(jsonb_path_ops) index on `Persona.skills` for `@>` on skill ids and tags, and pg_trgm GIN
indexes on `name` and `description` for ILIKE. SQLite scans.

The GIN indexes keep a small pending list (256 kB, not the default 4 MB): new entries are still
written in batches, but a search never reads through megabytes of them before autovacuum has
merged them (decision 142).
"""

import django.db.models.fields.json
import django.db.models.functions.text
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models

POSTGRESQL_INDEXES = (
    (
        "persona_skills_gin_idx",
        "USING gin (skills jsonb_path_ops) WITH (gin_pending_list_limit = 256)",
    ),
    (
        "persona_name_trgm_idx",
        "USING gin (name gin_trgm_ops) WITH (gin_pending_list_limit = 256)",
    ),
    (
        "persona_description_trgm_idx",
        "USING gin (description gin_trgm_ops) WITH (gin_pending_list_limit = 256)",
    ),
)


def create_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, method in POSTGRESQL_INDEXES:
        schema_editor.execute(f"CREATE INDEX {name} ON personas_persona {method}")


def drop_postgresql_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _ in POSTGRESQL_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0009_grant_proposals"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="generation",
            index=models.Index(
                django.db.models.functions.text.Lower(
                    django.db.models.fields.json.KeyTextTransform(
                        "organization",
                        django.db.models.fields.json.KeyTextTransform("provider", "composition"),
                    )
                ),
                name="generation_provider_idx",
            ),
        ),
        # Skipped on every database but PostgreSQL (CreateExtension checks the vendor).
        TrigramExtension(),
        migrations.RunPython(create_postgresql_indexes, drop_postgresql_indexes),
    ]
