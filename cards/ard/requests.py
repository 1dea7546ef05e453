"""Read what an ARD client sends, strictly and within bounds; every refusal names its field.

Each bound keeps a request's cost small whatever it holds (decision 221): the text's length
and words, a filter's keys, values and their length, page sizes, token length, facets. A
value of the wrong JSON type, an unknown key or a nested structure is refused, never coerced.
"""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.http import QueryDict
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from cards.ard import matching

MAX_TEXT = 500
MAX_WORDS = 16
MAX_FILTER_KEYS = 8
MAX_VALUES = 8
MAX_VALUE_LENGTH = 253  # a DNS name's limit: the longest publisher
MAX_KEY_LENGTH = 100
SEARCH_PAGE_SIZE = 10  # ARD §7.2
LIST_PAGE_SIZE = 20  # ARD §7.4
MAX_PAGE_SIZE = 100
MAX_EXPRESSION = 1000
MAX_FACETS = 4
FACET_LIMIT = 20  # ARD §7.3
MAX_FACET_LIMIT = 100
MAX_COUNT = 2**31 - 1
FEDERATION = ("auto", "referrals", "none")
FACET_FIELDS = ("type", "tags", "capabilities", "publisher")
# GET /agents orderBy: ARD's names for the persona columns they sort by.
ORDER_FIELDS = {"displayName": "name", "createdAt": "created_at", "updatedAt": "updated_at"}
NUL = "\x00"


class Invalid(exceptions.APIException):
    """ARD's INVALID_ARGUMENT (Appendix B), naming the field at fault."""

    status_code = 400
    default_code = "invalid_argument"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(detail=f"{field}: {message}")
        self.field = field


class StrictJSONParser(JSONParser):
    """JSON, where a nesting too deep for the parser is a 400 rather than a RecursionError."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply") from None


@dataclass(frozen=True)
class Query:
    words: tuple[str, ...] = ()
    filters: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def canonical(self) -> dict[str, Any]:
        return {"words": list(self.words), "filter": {k: list(v) for k, v in self.filters.items()}}


@dataclass(frozen=True)
class Search:
    query: Query
    federation: str
    page_size: int
    page_token: str | None


@dataclass(frozen=True)
class Facet:
    field: str
    limit: int
    min_count: int


@dataclass(frozen=True)
class Explore:
    query: Query
    facets: tuple[Facet, ...]


@dataclass(frozen=True)
class Listing:
    filters: dict[str, tuple[str, ...]]
    display_name: str | None
    created_after: datetime | None
    updated_after: datetime | None
    order_field: str
    descending: bool
    page_size: int
    page_token: str | None
    expression: str
    order_by: str


def _object(value: Any, name: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(name or "body", "must be a JSON object")
    for key in value:
        if key not in allowed:
            raise Invalid(f"{name}.{key}" if name else key, "is not a field ARD defines here")
    return value


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Invalid(name, f"must be a whole number from {low} to {high}")
    return value


def _token(value: Any, name: str = "pageToken") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 1024:
        raise Invalid(name, "must be a token this registry issued")
    return value


def _text(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, str):
        raise Invalid(name, "must be a string")
    if len(value) > MAX_TEXT:
        raise Invalid(name, f"must be at most {MAX_TEXT} characters")
    if NUL in value:
        raise Invalid(name, "must not contain a NUL character")
    words = tuple(dict.fromkeys(word.lower() for word in value.split()))
    if not words:
        raise Invalid(name, "must hold a word")
    if len(words) > MAX_WORDS:
        raise Invalid(name, f"must hold at most {MAX_WORDS} different words")
    return words


def _value(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise Invalid(name, "values are strings, or arrays of strings")
    if not 0 < len(value) <= MAX_VALUE_LENGTH or NUL in value:
        raise Invalid(name, f"values are 1 to {MAX_VALUE_LENGTH} characters, without NUL")
    return value


def read_filter(value: Any, name: str = "query.filter") -> dict[str, tuple[str, ...]]:
    """ARD §7.1: keys are supported entry paths; a value is a string or a list of strings."""
    if not isinstance(value, dict):
        raise Invalid(name, "must be a JSON object of field paths")
    if len(value) > MAX_FILTER_KEYS:
        raise Invalid(name, f"may hold at most {MAX_FILTER_KEYS} keys")
    filters: dict[str, tuple[str, ...]] = {}
    for key, values in value.items():
        where = f"{name}.{key[:MAX_KEY_LENGTH]}"
        if key not in matching.FILTERS:
            raise Invalid(where, "is not a field path this registry filters on")
        items = values if isinstance(values, list) else [values]
        if not 0 < len(items) <= MAX_VALUES:
            raise Invalid(where, f"give 1 to {MAX_VALUES} values")
        filters[key] = tuple(dict.fromkeys(_value(item, where) for item in items))
    return filters


def _query(value: Any, *, text_required: bool) -> Query:
    query = _object(value, "query", ("text", "filter"))
    if "text" not in query and text_required:
        raise Invalid("query.text", "is required")
    words = _text(query["text"], "query.text") if "text" in query else ()
    filters = read_filter(query["filter"]) if "filter" in query else {}
    return Query(words=words, filters=filters)


def read_search(body: Any) -> Search:
    body = _object(body, "", ("query", "federation", "pageSize", "pageToken"))
    if "query" not in body:
        raise Invalid("query", "is required")
    query = _query(body["query"], text_required=True)
    federation = body.get("federation", "auto")
    if federation not in FEDERATION:
        raise Invalid("federation", "must be one of " + ", ".join(FEDERATION))
    page_size = _integer(body.get("pageSize", SEARCH_PAGE_SIZE), "pageSize", 1, MAX_PAGE_SIZE)
    return Search(query, federation, page_size, _token(body.get("pageToken")))


def read_explore(body: Any) -> Explore:
    body = _object(body, "", ("query", "resultType"))
    query = _query(body["query"], text_required=False) if "query" in body else Query()
    if "resultType" not in body:
        raise Invalid("resultType", "is required")
    result_type = _object(body["resultType"], "resultType", ("facets",))
    requested = result_type.get("facets")
    if not isinstance(requested, list) or not 0 < len(requested) <= MAX_FACETS:
        raise Invalid("resultType.facets", f"must be a list of 1 to {MAX_FACETS} facets")
    facets: list[Facet] = []
    for index, item in enumerate(requested):
        name = f"resultType.facets[{index}]"
        facet = _object(item, name, ("field", "limit", "minCount"))
        if facet.get("field") not in FACET_FIELDS:
            raise Invalid(f"{name}.field", "must be one of " + ", ".join(FACET_FIELDS))
        if any(other.field == facet["field"] for other in facets):
            raise Invalid(f"{name}.field", "is asked for twice")
        limit = _integer(facet.get("limit", FACET_LIMIT), f"{name}.limit", 1, MAX_FACET_LIMIT)
        min_count = _integer(facet.get("minCount", 1), f"{name}.minCount", 1, MAX_COUNT)
        facets.append(Facet(facet["field"], limit, min_count))
    return Explore(query, tuple(facets))


# One clause of the List API's filter expression (ARD Appendix A): `field op value`, where the
# value is quoted ('...' or "...") or bare, and commas separate the values of one field (OR).
_CLAUSE = re.compile(
    r"\s*(?P<field>[A-Za-z][A-Za-z0-9_.]*)\s*(?P<op>=|>=|>)\s*"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s'\"]+)\s*"
)
_AND = re.compile(r"\s+AND\s+", re.IGNORECASE)
_DATES = {"createdAfter", "updatedAfter"}
# Appendix A's own names beside the entry paths the search filters take.
_LIST_ALIASES = {"publisherId": "publisher"}


def read_listing(params: QueryDict) -> Listing:
    for key in params:
        if key not in ("filter", "orderBy", "pageSize", "pageToken"):
            raise Invalid(key, "is not a parameter of GET /agents")
        if len(params.getlist(key)) > 1:
            raise Invalid(key, "give it once")
    expression = params.get("filter", "")
    if len(expression) > MAX_EXPRESSION or NUL in expression:
        raise Invalid("filter", f"must be at most {MAX_EXPRESSION} characters, without NUL")
    filters: dict[str, tuple[str, ...]] = {}
    dates: dict[str, datetime] = {}
    display_name: str | None = None
    clauses = _AND.split(expression.strip()) if expression.strip() else []
    if len(clauses) > MAX_FILTER_KEYS:
        raise Invalid("filter", f"may hold at most {MAX_FILTER_KEYS} clauses")
    for clause in clauses:
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            raise Invalid("filter", f"cannot read {clause[:60]!r}: write field = 'value'")
        name, op, raw = match["field"], match["op"], match["value"]
        value = raw[1:-1] if raw[:1] in "'\"" else raw
        # The dates filter strictly after (createdAfter), so `>=` would promise what they omit.
        wanted = ">" if name in _DATES else "="
        if op != wanted:
            raise Invalid("filter", f"{name} takes {wanted}")
        # An alias and its field are one field: given both, neither may silently win.
        key = _LIST_ALIASES.get(name, name)
        if key in dates or key in filters or (key == "displayName" and display_name):
            raise Invalid(
                "filter", f"{name} is given twice" + (f" (as {key})" if key != name else "")
            )
        if key in _DATES:
            dates[key] = _instant(value, key)
        elif key == "displayName":
            display_name = _value(value, "filter.displayName")
        else:
            filters.update(read_filter({key: value.split(",")}, "filter"))
    order_by = params.get("orderBy", "createdAt")
    parts = order_by.split()
    if (
        not 0 < len(parts) <= 2
        or parts[0] not in ORDER_FIELDS
        or (len(parts) == 2 and parts[1].upper() not in ("ASC", "DESC"))
    ):
        raise Invalid("orderBy", "must be displayName, createdAt or updatedAt, then ASC or DESC")
    page_size = params.get("pageSize", str(LIST_PAGE_SIZE))
    if not (page_size.isascii() and page_size.isdigit() and len(page_size) <= 4):
        raise Invalid("pageSize", f"must be a whole number from 1 to {MAX_PAGE_SIZE}")
    return Listing(
        filters=filters,
        display_name=display_name,
        created_after=dates.get("createdAfter"),
        updated_after=dates.get("updatedAfter"),
        order_field=ORDER_FIELDS[parts[0]],
        descending=len(parts) == 2 and parts[1].upper() == "DESC",
        page_size=_integer(int(page_size), "pageSize", 1, MAX_PAGE_SIZE),
        page_token=_token(params.get("pageToken")),
        expression=expression,
        order_by=order_by,
    )


def _instant(value: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"filter.{name}", "must be an ISO 8601 date or time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment
