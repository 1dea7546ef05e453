"""The directory's query parameters: read strictly, and stated in the OpenAPI schema as read.

Every bound below is in the schema (a pattern, a length, a number of values), so a client that
follows the schema never gets a 400, and every refusal is a 400 naming the parameter.
"""

import re
from dataclasses import dataclass

from django.http import QueryDict
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions

MAX_VALUES = 8
SKILL_ID_LENGTH = 80  # Skill.slug
TAG_LENGTH = 100
PROVIDER_LENGTH = 253  # OrganizationDomain.domain: a DNS name's limit
Q_LENGTH = 200
MAX_WORDS = 8

SKILL_ID = r"^[-a-zA-Z0-9_]+$"
# No NUL character, and something that is not white space (as virgo.api.NOT_BLANK).
TEXT = r"^[^\x00]*[^\s\x00][^\x00]*$"
# One to MAX_WORDS words, split by white space; no NUL character.
WORDS = rf"^\s*[^\s\x00]+(?:\s+[^\s\x00]+){{0,{MAX_WORDS - 1}}}\s*$"


@dataclass(frozen=True)
class DirectoryFilters:
    skills: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    provider: str | None = None
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Rule:
    pattern: str
    max_length: int
    reason: str

    def check(self, value: str) -> str | None:
        if value == "":
            return "must not be empty"
        if len(value) > self.max_length:
            return f"must be at most {self.max_length} characters"
        # Searched, as JSON Schema (and so schemathesis) reads a pattern: `$` also matches
        # before a final newline, so a value the schema admits is never refused here.
        if not re.search(self.pattern, value):
            return self.reason
        return None

    def schema(self) -> dict[str, object]:
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": self.max_length,
            "pattern": self.pattern,
        }


SKILL_RULE = _Rule(
    SKILL_ID, SKILL_ID_LENGTH, "must be a skill id: letters, digits, hyphens and underscores"
)
TAG_RULE = _Rule(TEXT, TAG_LENGTH, "must hold a character that is not white space, and no NUL")
PROVIDER_RULE = _Rule(
    TEXT, PROVIDER_LENGTH, "must hold a character that is not white space, and no NUL"
)
Q_RULE = _Rule(WORDS, Q_LENGTH, f"must be 1 to {MAX_WORDS} words, and hold no NUL character")


def read_filters(query: QueryDict) -> DirectoryFilters:
    """The filters of a directory request, or a 400 naming every bad parameter and why."""
    errors: dict[str, list[str]] = {}
    skills = _many(query, "skill", SKILL_RULE, errors)
    tags = _many(query, "tag", TAG_RULE, errors)
    provider = _one(query, "provider", PROVIDER_RULE, errors)
    q = _one(query, "q", Q_RULE, errors)
    if errors:
        raise exceptions.ValidationError(errors)
    words = tuple(dict.fromkeys(q.split())) if q is not None else ()
    return DirectoryFilters(skills=skills, tags=tags, provider=provider, words=words)


def _many(
    query: QueryDict, name: str, rule: _Rule, errors: dict[str, list[str]]
) -> tuple[str, ...]:
    values = query.getlist(name)
    problems = []
    if len(values) > MAX_VALUES:
        problems.append(f"give at most {MAX_VALUES} values")
    problems += sorted({problem for value in values if (problem := rule.check(value))})
    if problems:
        errors[name] = problems
        return ()
    return tuple(dict.fromkeys(values))


def _one(query: QueryDict, name: str, rule: _Rule, errors: dict[str, list[str]]) -> str | None:
    values = query.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        errors[name] = ["give it once"]
        return None
    if problem := rule.check(values[0]):
        errors[name] = [problem]
        return None
    return values[0]


PARAMETERS = [
    OpenApiParameter(
        "skill",
        type={"type": "array", "items": SKILL_RULE.schema(), "maxItems": MAX_VALUES},
        style="form",
        explode=True,
        description=(
            "A skill id (as on the cards); repeat it for more. A persona is listed only if "
            "it carries every one. An id no skill has matches nothing."
        ),
    ),
    OpenApiParameter(
        "tag",
        type={"type": "array", "items": TAG_RULE.schema(), "maxItems": MAX_VALUES},
        style="form",
        explode=True,
        description=(
            "A skill tag, exactly; repeat it for more. A persona is listed only if each one "
            "is on one of its skills."
        ),
    ),
    OpenApiParameter(
        "provider",
        type=PROVIDER_RULE.schema(),
        description=(
            "The proven organization domain the persona's card names as provider, in any case "
            "(ASCII). A card that names this installation, not a proven domain, never matches."
        ),
    ),
    OpenApiParameter(
        "q",
        type=Q_RULE.schema(),
        description=(
            f"1 to {MAX_WORDS} words, split by white space. A persona is listed only if its "
            "name or description holds every word (anywhere, in any case)."
        ),
    ),
]
