"""Which listed personas an ARD query matches, and how relevant each is to its text.

Filters follow ARD §7.1: OR within a key (a scalar is one value), AND across keys, each key a
path into the entry as cards.ard.entries builds it, answered in SQL from the persona row and its
current generation (so a page never needs a query per row). The relevance score is
PostgreSQL full-text rank where it runs, and a documented weighted match elsewhere (decision
219); both give 0-100 and one cutoff, a score of at least 1, for search and explore alike.
"""

import json
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from django.db.models import (
    BooleanField,
    Exists,
    Expression,
    F,
    Func,
    IntegerField,
    Lookup,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.sql.compiler import SQLCompiler

from cards.ard import entries
from personas.models import PROVIDER_ORGANIZATION, Generation, Persona
from personas.search import SkillsCarry, like_pattern

# Where each word weighs in the SQLite fallback: a persona's name, its skills (names, ids and
# tags), its description; a score is the share of the best possible, 0-100.
NAME_WEIGHT, SKILL_WEIGHT, DESCRIPTION_WEIGHT = 3, 2, 1
BEST = NAME_WEIGHT + SKILL_WEIGHT + DESCRIPTION_WEIGHT
# Conditions that hold for every persona and for none: an empty Q() would vanish from an OR.
EVERY = Q(pk__isnull=False)
NONE = Q(pk__in=[])


def registry_personas() -> QuerySet[Persona]:
    """What the registry may list: listed by their owner, standing (so their card pins a grant),
    neither they nor their current generation revoked. A quarantined stamp does not stand."""
    return (
        Persona.objects.advertised()
        .filter(standing=True, revoked_at__isnull=True)
        .with_generation_revoked()
        .filter(generation_revoked=False)
    )


def _current() -> QuerySet[Generation]:
    return Generation.objects.filter(persona=OuterRef("pk"), number=OuterRef("generation"))


class IdentityHolds(Lookup):
    """The identity chain (a generation's `composition.identity`) holds the string `value` at
    `path`: jsonb containment on PostgreSQL, which the GIN index of migration personas 0016
    answers; json_extract on SQLite. The chain is Virgo's own, objects down to string leaves,
    where containment of the one-path object is equality at the path."""

    lookup_name = "identity_holds"
    prepare_rhs = False

    def as_sql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = compiler.compile(self.lhs)
        path, value = self.rhs
        json_path = "$" + "".join(f'."{part}"' for part in ("identity", *path))
        return f"json_extract({lhs}, %s) = %s", [*params, json_path, value]

    def as_postgresql(self, compiler: SQLCompiler, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = compiler.compile(self.lhs)
        path, value = self.rhs
        nested: Any = value
        for part in reversed(path):
            nested = {part: nested}
        return f"({lhs} -> 'identity') @> %s::jsonb", [*params, json.dumps(nested)]


def _identity_is(path: Sequence[str], value: str) -> Q:
    """The current generation's identity chain holds `value` at `path`."""
    return Q(Exists(_current().filter(IdentityHolds(F("composition"), (tuple(path), value)))))


def publisher_is(publisher: str) -> Q:
    """The entry's URN publisher is `publisher`: the proven domain, else the installation."""
    domain = publisher.lower()
    proven = Q(Exists(_current().alias(domain=PROVIDER_ORGANIZATION).filter(domain=domain)))
    if domain != entries.installation_host():
        return proven
    some_domain = _current().alias(domain=PROVIDER_ORGANIZATION).filter(domain__isnull=False)
    return proven | ~Q(Exists(some_domain))


def publisher_column() -> Subquery:
    """The proven domain of each persona's current generation, or NULL (the installation)."""
    return Subquery(_current().annotate(domain=PROVIDER_ORGANIZATION).values("domain")[:1])


def _any(values: Sequence[str], one: Callable[[str], Q]) -> Q:
    condition = NONE
    for value in values:
        condition |= one(value)
    return condition


def _type(value: str) -> Q:
    return EVERY if value == entries.ENTRY_TYPE else NONE


def _version(value: str) -> Q:
    return Q(generation=int(value)) if value.isascii() and value.isdigit() else NONE


def _identifier(value: str) -> Q:
    parsed = entries.parse_identifier(value)
    if parsed is None:
        return NONE
    publisher, persona_uuid = parsed
    try:
        key = uuid.UUID(persona_uuid)
    except ValueError:
        return NONE
    # Only the form an entry shows (lower-case, hyphenated), as PostgreSQL's uuid text is; the
    # persona's key by equality, so its unique index answers it.
    return Q(uuid=key) & publisher_is(publisher) if str(key) == persona_uuid else NONE


def _attestation(value: str) -> Q:
    if value == entries.PINNED_GRANT:
        # Every persona the registry lists stands, so its card pins its grant.
        return EVERY
    if value == entries.OWNER_OIDC:
        return _identity_is(("owner", "verification"), "oidc")
    if value.startswith(entries.ORGANIZATION_PREFIX):
        method = value.removeprefix(entries.ORGANIZATION_PREFIX)
        if method != "unverified":
            return _identity_is(("organization", "verification"), method)
    return NONE


def _metadata(key: str, value: str) -> Q:
    """The identity chain holds `value` where ARD's metadata key `key` points."""
    return _identity_is(entries.METADATA_PATHS[key], value)


FILTERS: dict[str, Callable[[str], Q]] = {
    "type": _type,
    "tags": lambda tag: Q(SkillsCarry(F("skills"), [{"tags": [tag]}])),
    "capabilities": lambda skill: Q(SkillsCarry(F("skills"), [{"id": skill}])),
    "publisher": publisher_is,
    "version": _version,
    "identifier": _identifier,
    "trustManifest.identity": _identifier,
    "trustManifest.identityType": lambda value: EVERY if value == "other" else NONE,
    "trustManifest.attestations.type": _attestation,
    # The path is looked up at each call, not at import: `make mutation` turns its mutants on
    # after the import, and would otherwise never test this rule.
    **{f"metadata.{key}": partial(_metadata, key) for key in entries.METADATA_PATHS},
}


def filter_condition(filters: dict[str, tuple[str, ...]]) -> Q:
    """ARD §7.1: every key must hold (AND), each by any of its values (OR)."""
    condition = Q()
    for key, values in filters.items():
        condition &= _any(values, FILTERS[key])
    return condition


def _columns(expression: Func, compiler: SQLCompiler) -> list[str]:
    columns = []
    for source in expression.get_source_expressions():
        sql, params = compiler.compile(source)
        assert not params  # plain columns
        columns.append(sql)
    return columns


def search_document(name: str, description: str, skills: str) -> str:
    """The tsvector PostgreSQL ranks and matches: the name (weight A), the skills' names, ids
    and tags (B), the description (C), in the `simple` configuration. Migration personas 0016
    indexes this very expression (GIN): change one, change the other."""
    skill_text = " || ' ' || ".join(
        f"COALESCE(jsonb_path_query_array({skills}, '{path}')::text, '')"
        for path in ("$[*].name", "$[*].id", "$[*].tags[*]")
    )
    return (
        f"setweight(to_tsvector('simple', {name}), 'A')"
        f" || setweight(to_tsvector('simple', {skill_text}), 'B')"
        f" || setweight(to_tsvector('simple', {description}), 'C')"
    )


# Every lexeme of the words, ORed: plainto_tsquery's own lexemes (its ANDs turned into ORs in
# its text form, where no lexeme holds a space), read back by the tsquery cast, which parses
# no word again. All of it is immutable, so the planner folds it to a constant and estimates
# the match from the index's statistics. A document holds one of these lexemes exactly when
# its ts_rank against the words is above 0.
ANY_LEXEME = "replace(plainto_tsquery('simple', %s)::text, ' & ', ' | ')::tsquery"


class TextMatches(Func):
    """Whether a persona's search document holds a lexeme of the words: on PostgreSQL an `@@`
    that the GIN index of migration personas 0016 answers, so only the personas that can score
    are ranked. It removes none that would: ts_rank is 0 unless the document holds one of the
    query's lexemes. SQLite has no such index: there it holds for every persona, and the
    relevance cutoff alone decides."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, words: Sequence[str]) -> None:
        super().__init__(F("name"), F("description"), F("skills"))
        self.words = tuple(words)

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: Any, **extra: Any
    ) -> tuple[str, list[Any]]:
        return "1 = 1", []

    def as_postgresql(
        self, compiler: SQLCompiler, connection: Any, **extra: Any
    ) -> tuple[str, list[Any]]:
        document = search_document(*_columns(self, compiler))
        return f"{document} @@ {ANY_LEXEME}", [" ".join(self.words)]


class Relevance(Func):
    """0-100: how well a persona's name, skills and description answer the query's words."""

    output_field = IntegerField()

    def __init__(self, words: Sequence[str]) -> None:
        super().__init__(F("name"), F("description"), F("skills"))
        self.words = tuple(words)

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: Any, **extra: Any
    ) -> tuple[str, list[Any]]:
        """The fallback (SQLite): each word found (LIKE, any case of ASCII) in the name weighs
        3, in a skill's name, id or tag 2, in the description 1; the sum over the best sum."""
        name, description, skills = _columns(self, compiler)
        terms: list[str] = []
        params: list[Any] = []
        for word in self.words:
            pattern = like_pattern(word)
            terms.append(
                f"(CASE WHEN {name} LIKE %s ESCAPE '\\' THEN {NAME_WEIGHT} ELSE 0 END)"
                " + (CASE WHEN EXISTS (SELECT 1 FROM json_each("
                f"{skills}) AS skill WHERE json_extract(skill.value, '$.name') LIKE %s"
                " ESCAPE '\\' OR json_extract(skill.value, '$.id') LIKE %s ESCAPE '\\'"
                " OR EXISTS (SELECT 1 FROM json_each(skill.value, '$.tags') AS tag"
                f" WHERE tag.value LIKE %s ESCAPE '\\')) THEN {SKILL_WEIGHT} ELSE 0 END)"
                f" + (CASE WHEN {description} LIKE %s ESCAPE '\\'"
                f" THEN {DESCRIPTION_WEIGHT} ELSE 0 END)"
            )
            params += [pattern] * 5
        total = " + ".join(terms) or "0"
        return f"((100 * ({total})) / {BEST * max(len(self.words), 1)})", params

    def as_postgresql(
        self, compiler: SQLCompiler, connection: Any, **extra: Any
    ) -> tuple[str, list[Any]]:
        """ts_rank over the name (weight A), the skills' names, ids and tags (B) and the
        description (C), against any of the words; as a percentage, capped at 100."""
        document = search_document(*_columns(self, compiler))
        query = " || ".join("plainto_tsquery('simple', %s)" for _ in self.words)
        return (
            f"LEAST(100, ROUND(100 * ts_rank({document}, {query})))::integer",
            list(self.words),
        )


def ranked(queryset: QuerySet[Persona], words: Sequence[str]) -> QuerySet[Persona]:
    """The personas relevant to the words (score at least 1), best first, then by key."""
    relevance: Expression = Relevance(words)
    return (
        queryset.filter(TextMatches(words))
        .annotate(score=relevance)
        .filter(score__gte=1)
        .order_by("-score", "id")
    )
