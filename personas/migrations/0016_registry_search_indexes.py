"""Indexes for the ARD registry's text and identity filters (VX-DISC-2), on PostgreSQL.

- `persona_search_document_gin_idx`: GIN over each persona's search document, the expression
  of cards.ard.matching.search_document column for column (the name, weight A; the skills'
  names, ids and tags, B; the description, C; a `simple` tsvector). A search asks it with `@@`
  any lexeme of its words (cards.ard.matching.TextMatches), so only personas that can score are
  ranked, whatever the number listed.
- `generation_identity_gin_idx`: GIN (jsonb_path_ops) over each generation's identity chain,
  `composition -> 'identity'`, for the `metadata.virgo.*` and attestation filters, asked with
  `@>` (cards.ard.matching.IdentityHolds).

PostgreSQL only, as migration 0010's: SQLite has neither operator and scans; the model state
does not know them. Small pending lists, as 0010's (decision 142).
"""

from django.db import migrations

SKILL_TEXT = " || ' ' || ".join(
    f"COALESCE(jsonb_path_query_array(skills, '{path}')::text, '')"
    for path in ("$[*].name", "$[*].id", "$[*].tags[*]")
)
DOCUMENT = (
    "setweight(to_tsvector('simple', name), 'A')"
    f" || setweight(to_tsvector('simple', {SKILL_TEXT}), 'B')"
    " || setweight(to_tsvector('simple', description), 'C')"
)
POSTGRESQL_INDEXES = (
    (
        "persona_search_document_gin_idx",
        f"personas_persona USING gin (({DOCUMENT})) WITH (gin_pending_list_limit = 256)",
    ),
    (
        "generation_identity_gin_idx",
        "personas_generation USING gin ((composition -> 'identity') jsonb_path_ops)"
        " WITH (gin_pending_list_limit = 256)",
    ),
)


def create_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, definition in POSTGRESQL_INDEXES:
        schema_editor.execute(f"CREATE INDEX {name} ON {definition}")


def drop_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _ in POSTGRESQL_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0015_revocation_status_list"),
    ]

    operations = [migrations.RunPython(create_indexes, drop_indexes)]
