"""Directory search: the filters of GET /api/directory/, in forms PostgreSQL can index.

Each filter is written so that PostgreSQL answers it from an index made by migration 0010:
skill ids and tags by one GIN (jsonb_path_ops) index on `Persona.skills` with `@>`, words by
trigram GIN indexes on `name` and `description` with ILIKE, the provider by an expression index
on the organisation of each generation's composition. SQLite has none of these operators; it
gets the same answers by scanning (json_each, LIKE), which is what the embedded default is for.
"""

import json
from collections.abc import Sequence
from typing import Any

from django.db.models import Exists, F, Lookup, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Lower
from django.db.models.sql.compiler import SQLCompiler

from personas.models import PROVIDER_ORGANIZATION, Generation


def like_pattern(word: str) -> str:
    """`word` anywhere, its LIKE wildcards taken literally (backslash is the escape)."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class HoldsText(Lookup):
    """The text holds the pattern, in any case: ILIKE (trigram-indexable) on PostgreSQL."""

    lookup_name = "holds_text"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        # SQLite's LIKE ignores the case of ASCII letters, as ILIKE does.
        lhs, params = compiler.compile(self.lhs)
        return f"{lhs} LIKE %s ESCAPE '\\'", [*params, self.rhs]

    def as_postgresql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = compiler.compile(self.lhs)
        return f"{lhs} ILIKE %s", [*params, self.rhs]


class SkillsCarry(Lookup):
    """Every entry is contained in one of the persona's skills (`{"id": ...}` or
    `{"tags": [...]}`): jsonb containment (GIN-indexable) on PostgreSQL."""

    lookup_name = "skills_carry"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = compiler.compile(self.lhs)
        clauses: list[str] = []
        params: list[Any] = []
        for entry in self.rhs:
            if "id" in entry:
                clauses.append(
                    f"EXISTS (SELECT 1 FROM json_each({lhs}) AS skill"
                    " WHERE json_extract(skill.value, '$.id') = %s)"
                )
                params += [*lhs_params, entry["id"]]
            for tag in entry.get("tags", ()):
                clauses.append(
                    f"EXISTS (SELECT 1 FROM json_each({lhs}) AS skill,"
                    " json_each(skill.value, '$.tags') AS tag WHERE tag.value = %s)"
                )
                params += [*lhs_params, tag]
        return "(" + " AND ".join(clauses) + ")", params

    def as_postgresql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = compiler.compile(self.lhs)
        return f"{lhs} @> %s::jsonb", [*params, json.dumps(list(self.rhs))]


def search_filter(
    *,
    skills: Sequence[str] = (),
    tags: Sequence[str] = (),
    provider: str | None = None,
    words: Sequence[str] = (),
) -> Q:
    """Personas that carry every skill id and every tag (a tag on any of their skills), whose
    card names `provider` as its organisation (in any case), and whose name or description
    holds every word. Nothing given: every persona."""
    condition = Q()
    entries = [{"id": skill} for skill in skills] + [{"tags": [tag]} for tag in tags]
    if entries:
        condition &= Q(SkillsCarry(F("skills"), entries))
    for word in words:
        pattern = like_pattern(word)
        condition &= Q(HoldsText(F("name"), pattern)) | Q(HoldsText(F("description"), pattern))
    if provider is not None:
        condition &= Q(Exists(_generations_of_provider(provider)))
    return condition


def _generations_of_provider(provider: str) -> QuerySet[Generation]:
    """The persona's current generation, if its card names this provider."""
    return Generation.objects.alias(provider=PROVIDER_ORGANIZATION).filter(
        persona=OuterRef("pk"), number=OuterRef("generation"), provider=Lower(Value(provider))
    )
