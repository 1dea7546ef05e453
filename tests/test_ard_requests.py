"""How the ARD registry reads a request (cards.ard.requests): every refusal, and every bound at
its edge (VX-DISC-2, decision 221).

A refusal is ARD's INVALID_ARGUMENT (Appendix B) naming the field at fault and saying what the
field must be, so a client can correct its request without reading our code; a bound lets a
request exactly at it through and refuses one past it.
"""

from typing import Any
from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

SEARCH, EXPLORE, AGENTS = "/api/ard/search", "/api/ard/explore", "/api/ard/agents"
A2A = "application/a2a-agent-card+json"
WHOLE_PAGE = "must be a whole number from 1 to 100"
FACET_NAMES = "must be one of type, tags, capabilities, publisher"
ORDER = "must be displayName, createdAt or updatedAt, then ASC or DESC"
NOT_A_FIELD = "is not a field ARD defines here"
NOT_A_PATH = "is not a field path this registry filters on"
VALUE_LENGTH = "values are 1 to 253 characters, without NUL"
VALUE_TYPE = "values are strings, or arrays of strings"
NOT_ISSUED = "was not issued by this registry"
BAD_TOKEN = "must be a token this registry issued"
TOO_LONG = "must be at most 1000 characters, without NUL"


@pytest.fixture
def client() -> APIClient:
    return token_client(make_owner("reader"))


def ask(client: APIClient, path: str, request: Any) -> Any:
    """POST `request` as JSON to search or explore; GET agents with `request` as its query."""
    if path == AGENTS:
        return client.get(f"{AGENTS}?{urlencode(request, doseq=True)}")
    return client.post(path, request, format="json")


def text(value: Any) -> dict[str, Any]:
    return {"query": {"text": value}}


def filtered(query_filter: Any) -> dict[str, Any]:
    return {"query": {"text": "a", "filter": query_filter}}


def paged(**fields: Any) -> dict[str, Any]:
    return {"query": {"text": "a"}, **fields}


def facets(*requested: Any, **result_type: Any) -> dict[str, Any]:
    return {"resultType": {"facets": list(requested), **result_type}}


def clauses(*parts: str) -> dict[str, str]:
    return {"filter": " AND ".join(parts)}


# Eight different filter keys (MAX_FILTER_KEYS), each with a value that is well formed.
EIGHT_KEYS = {
    "type": A2A,
    "tags": "t",
    "capabilities": "c",
    "publisher": "p.example",
    "version": "1",
    "identifier": "urn:air:p.example:virgo-persona:x",
    "trustManifest.identityType": "other",
    "metadata.virgo.provider": "installation",
}
# Eight different list clauses (MAX_FILTER_KEYS), each well formed.
EIGHT_CLAUSES = (
    f"type = '{A2A}'",
    "tags = t",
    "capabilities = c",
    "publisher = p.example",
    "version = 1",
    "displayName = d",
    "createdAfter > '2000-01-01T00:00:00Z'",
    "updatedAfter > 2000-01-01",
)
UNREADABLE = "type = '" + "x" * 80  # a quote that never closes, past the 60 characters quoted


@pytest.mark.parametrize(
    ("path", "request_", "field", "message"),
    [
        # The body and its keys.
        (SEARCH, [], "body", "must be a JSON object"),
        (SEARCH, paged(sort="score"), "sort", NOT_A_FIELD),
        (SEARCH, {"query": {"text": "a", "sort": 1}}, "query.sort", NOT_A_FIELD),
        (SEARCH, {}, "query", "is required"),
        (SEARCH, {"query": "a"}, "query", "must be a JSON object"),
        # query.text
        (SEARCH, {"query": {}}, "query.text", "is required"),
        (SEARCH, text(7), "query.text", "must be a string"),
        (SEARCH, text("x" * 501), "query.text", "must be at most 500 characters"),
        (SEARCH, text("a\x00b"), "query.text", "must not contain a NUL character"),
        (SEARCH, text(" \t "), "query.text", "must hold a word"),
        (SEARCH, text(" ".join(f"w{n}" for n in range(17))), "query.text",
         "must hold at most 16 different words"),
        # query.filter
        (SEARCH, filtered([]), "query.filter", "must be a JSON object of field paths"),
        (SEARCH, filtered({**EIGHT_KEYS, "tags": "t", "metadata.virgo.owner.issuer": "i"}),
         "query.filter", "may hold at most 8 keys"),
        (SEARCH, filtered({"system_prompt": "x"}), "query.filter.system_prompt", NOT_A_PATH),
        (SEARCH, filtered({"k" * 150: "x"}), "query.filter." + "k" * 100, NOT_A_PATH),
        (SEARCH, filtered({"tags": []}), "query.filter.tags", "give 1 to 8 values"),
        (SEARCH, filtered({"tags": [f"t{n}" for n in range(9)]}), "query.filter.tags",
         "give 1 to 8 values"),
        (SEARCH, filtered({"tags": {"$ne": 1}}), "query.filter.tags", VALUE_TYPE),
        (SEARCH, filtered({"tags": [["deep"]]}), "query.filter.tags", VALUE_TYPE),
        (SEARCH, filtered({"tags": ""}), "query.filter.tags", VALUE_LENGTH),
        (SEARCH, filtered({"tags": "x" * 254}), "query.filter.tags", VALUE_LENGTH),
        (SEARCH, filtered({"tags": ["a", "b\x00"]}), "query.filter.tags", VALUE_LENGTH),
        # federation, pageSize, pageToken
        (SEARCH, paged(federation="everywhere"), "federation",
         "must be one of auto, referrals, none"),
        (SEARCH, paged(pageSize=0), "pageSize", WHOLE_PAGE),
        (SEARCH, paged(pageSize=101), "pageSize", WHOLE_PAGE),
        (SEARCH, paged(pageSize="5"), "pageSize", WHOLE_PAGE),
        (SEARCH, paged(pageSize=2.0), "pageSize", WHOLE_PAGE),
        (SEARCH, paged(pageSize=True), "pageSize", WHOLE_PAGE),
        (SEARCH, paged(pageToken=5), "pageToken", BAD_TOKEN),
        (SEARCH, paged(pageToken=""), "pageToken", BAD_TOKEN),
        (SEARCH, paged(pageToken="x" * 1025), "pageToken", BAD_TOKEN),
        # Explore: its body, resultType and each facet.
        (EXPLORE, [], "body", "must be a JSON object"),
        (EXPLORE, {**facets({"field": "type"}), "sort": 1}, "sort", NOT_A_FIELD),
        (EXPLORE, {"query": {"text": ""}, **facets({"field": "type"})}, "query.text",
         "must hold a word"),
        (EXPLORE, {"query": {"text": "a"}}, "resultType", "is required"),
        (EXPLORE, {"resultType": ["type"]}, "resultType", "must be a JSON object"),
        (EXPLORE, facets({"field": "type"}, size=1), "resultType.size", NOT_A_FIELD),
        (EXPLORE, {"resultType": {}}, "resultType.facets", "must be a list of 1 to 4 facets"),
        (EXPLORE, {"resultType": {"facets": "type"}}, "resultType.facets",
         "must be a list of 1 to 4 facets"),
        (EXPLORE, facets(), "resultType.facets", "must be a list of 1 to 4 facets"),
        (EXPLORE, facets(*({"field": f} for f in ("type", "tags", "capabilities", "publisher",
                                                  "type"))),
         "resultType.facets", "must be a list of 1 to 4 facets"),
        (EXPLORE, facets("type"), "resultType.facets[0]", "must be a JSON object"),
        (EXPLORE, facets({"field": "type", "size": 2}), "resultType.facets[0].size", NOT_A_FIELD),
        (EXPLORE, facets({"field": "grant_salt"}), "resultType.facets[0].field", FACET_NAMES),
        (EXPLORE, facets({"limit": 2}), "resultType.facets[0].field", FACET_NAMES),
        (EXPLORE, facets({"field": "tags"}, {"field": "tags"}), "resultType.facets[1].field",
         "is asked for twice"),
        (EXPLORE, facets({"field": "tags", "limit": 0}), "resultType.facets[0].limit",
         WHOLE_PAGE),
        (EXPLORE, facets({"field": "tags", "limit": 101}), "resultType.facets[0].limit",
         WHOLE_PAGE),
        (EXPLORE, facets({"field": "tags", "minCount": 0}), "resultType.facets[0].minCount",
         "must be a whole number from 1 to 2147483647"),
        (EXPLORE, facets({"field": "tags", "minCount": 2**31}), "resultType.facets[0].minCount",
         "must be a whole number from 1 to 2147483647"),
        # GET /agents: its parameters.
        (AGENTS, {"unknown": "1"}, "unknown", "is not a parameter of GET /agents"),
        (AGENTS, {"pageSize": ["2", "2"]}, "pageSize", "give it once"),
        # Its filter expression (ARD Appendix A).
        (AGENTS, {"filter": f"type = '{A2A}'" + " " * 1000}, "filter", TOO_LONG),
        (AGENTS, {"filter": "type = 'a\x00'"}, "filter", TOO_LONG),
        (AGENTS, clauses(*EIGHT_CLAUSES, "version = 2"), "filter",
         "may hold at most 8 clauses"),
        (AGENTS, {"filter": "type ="}, "filter", "cannot read 'type =': write field = 'value'"),
        (AGENTS, {"filter": UNREADABLE}, "filter",
         f"cannot read {UNREADABLE[:60]!r}: write field = 'value'"),
        (AGENTS, {"filter": "createdAfter = '2026-01-01'"}, "filter", "createdAfter takes >"),
        (AGENTS, {"filter": "updatedAfter = '2026-01-01'"}, "filter", "updatedAfter takes >"),
        (AGENTS, {"filter": "type > 'x'"}, "filter", "type takes ="),
        # The dates filter strictly after: `>=` would promise the moment itself.
        (AGENTS, {"filter": "createdAfter >= '2026-01-01'"}, "filter", "createdAfter takes >"),
        (AGENTS, {"filter": "type >= 'x'"}, "filter", "type takes ="),
        # An alias and its field are one field: neither clause may silently replace the other.
        (AGENTS, clauses("publisher = a.example", "publisherId = b.example"), "filter",
         "publisherId is given twice (as publisher)"),
        (AGENTS, clauses("publisherId = a.example", "publisher = b.example"), "filter",
         "publisher is given twice"),
        (AGENTS, clauses("type = a", "type = b"), "filter", "type is given twice"),
        (AGENTS, clauses("createdAfter > 2026-01-01", "createdAfter > 2026-02-01"), "filter",
         "createdAfter is given twice"),
        (AGENTS, clauses("displayName = a", "displayName = b"), "filter",
         "displayName is given twice"),
        (AGENTS, {"filter": "createdAfter > 'yesterday'"}, "filter.createdAfter",
         "must be an ISO 8601 date or time"),
        (AGENTS, {"filter": "updatedAfter > 2026-13-01"}, "filter.updatedAfter",
         "must be an ISO 8601 date or time"),
        (AGENTS, {"filter": "displayName = ''"}, "filter.displayName", VALUE_LENGTH),
        (AGENTS, {"filter": "system_prompt = 'x'"}, "filter.system_prompt", NOT_A_PATH),
        (AGENTS, {"filter": "tags = 'a,'"}, "filter.tags", VALUE_LENGTH),
        (AGENTS, {"filter": "tags = " + ",".join("abcdefghi")}, "filter.tags",
         "give 1 to 8 values"),
        # orderBy, pageSize, pageToken
        (AGENTS, {"orderBy": ""}, "orderBy", ORDER),
        (AGENTS, {"orderBy": "score"}, "orderBy", ORDER),
        (AGENTS, {"orderBy": "createdAt sideways"}, "orderBy", ORDER),
        (AGENTS, {"orderBy": "createdAt DESC name"}, "orderBy", ORDER),
        (AGENTS, {"pageSize": ""}, "pageSize", WHOLE_PAGE),
        (AGENTS, {"pageSize": "abc"}, "pageSize", WHOLE_PAGE),
        (AGENTS, {"pageSize": "-1"}, "pageSize", WHOLE_PAGE),
        # Digits, but fullwidth ones: int() would read them as 10.
        (AGENTS, {"pageSize": "\uff11\uff10"}, "pageSize", WHOLE_PAGE),
        (AGENTS, {"pageSize": "00100"}, "pageSize", WHOLE_PAGE),  # five digits
        (AGENTS, {"pageSize": "0"}, "pageSize", WHOLE_PAGE),
        (AGENTS, {"pageSize": "101"}, "pageSize", WHOLE_PAGE),
        (AGENTS, {"pageToken": ""}, "pageToken", BAD_TOKEN),
    ],
)  # fmt: skip
def test_each_refusal_names_its_field_and_what_the_field_must_be(
    client: APIClient, path: str, request_: Any, field: str, message: str
) -> None:
    """VX-DISC-2: ARD's INVALID_ARGUMENT (Appendix B), never a 500, with the field at fault and
    a message of the form `<field>: <what it must be>`."""
    response = ask(client, path, request_)
    assert response.status_code == 400, response.content
    assert response.json() == {
        "errorCode": "INVALID_ARGUMENT",
        "message": f"{field}: {message}",
        "field": field,
    }


@pytest.mark.parametrize(
    ("path", "request_"),
    [
        (SEARCH, text("x" * 500)),
        (SEARCH, text(" ".join(f"w{n}" for n in range(16)))),
        # Twenty words, sixteen of them different: the bound counts different words.
        (SEARCH, text(" ".join(f"w{n % 16}" for n in range(20)))),
        (SEARCH, filtered(EIGHT_KEYS)),
        (SEARCH, filtered({"tags": [f"t{n}" for n in range(8)]})),
        (SEARCH, filtered({"tags": "x" * 253})),
        (SEARCH, paged(pageSize=1)),
        (SEARCH, paged(pageSize=100)),
        (SEARCH, paged(federation="auto")),
        (SEARCH, paged(federation="referrals")),
        (SEARCH, paged(federation="none")),
        (EXPLORE, facets(*({"field": f} for f in ("type", "tags", "capabilities", "publisher")))),
        (EXPLORE, facets({"field": "tags", "limit": 1, "minCount": 2**31 - 1})),
        (EXPLORE, facets({"field": "tags", "limit": 100, "minCount": 1})),
        # Explore's query may narrow by filter alone: its text is optional.
        (EXPLORE, {"query": {"filter": {"type": A2A}}, **facets({"field": "type"})}),
        (AGENTS, {"filter": f"type = '{A2A}'" + " " * (1000 - len(f"type = '{A2A}'"))}),
        (AGENTS, clauses(*EIGHT_CLAUSES)),
        (AGENTS, {"orderBy": "displayName asc"}),
        (AGENTS, {"orderBy": "updatedAt DESC"}),
        (AGENTS, {"pageSize": "1"}),
        (AGENTS, {"pageSize": "100"}),
        (AGENTS, {"pageSize": "0100"}),  # four digits: a hundred
    ],
)  # fmt: skip
def test_a_request_exactly_at_each_bound_is_answered(
    client: APIClient, path: str, request_: Any
) -> None:
    """VX-DISC-2, decision 221: each bound is inclusive: 500 characters and 16 different words
    of text, 8 filter keys or clauses, 8 values of 253 characters, page sizes 1 and 100, 4
    facets, limits 1 and 100, minCount up to 2^31-1, a list filter of 1000 characters."""
    response = ask(client, path, request_)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("path", "request_"),
    [
        (SEARCH, paged(pageToken="x")),
        (SEARCH, paged(pageToken="x" * 1024)),
        (AGENTS, {"pageToken": "x" * 1024}),
    ],
)
def test_a_token_within_its_length_is_judged_by_its_signature(
    client: APIClient, path: str, request_: Any
) -> None:
    """VX-DISC-2: a pageToken of 1 to 1024 characters passes the length bound, and is then
    refused because no page of this registry issued it (cards.ard.paging)."""
    response = ask(client, path, request_)
    assert response.status_code == 400
    assert response.json()["message"] == f"pageToken: {NOT_ISSUED}"


def test_json_nested_too_deeply_is_refused_as_such(client: APIClient) -> None:
    """VX-DISC-2: nesting past the parser's depth is ARD's INVALID_ARGUMENT saying so, not a
    RecursionError's 500."""
    deep = '{"query": {"text": "a", "filter": {"tags": ' + "[" * 20000 + "]" * 20000 + "}}}"
    response = client.post(SEARCH, deep, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "errorCode": "INVALID_ARGUMENT",
        "message": "JSON parse error - nested too deeply",
    }


# The list's filter expression, read ------------------------------------------------------------


@pytest.fixture
def listed() -> dict[str, Persona]:
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    grace = make_agent(make_owner("grace", organization="", oidc=False))
    return {
        "keeper": make_persona(ada, name="Quokka Keeper", discoverable=True),
        "quokka": make_persona(ada, name="Quokka", discoverable=True),
        "xl": make_persona(grace, name="XL Reviewer", discoverable=True),
    }


def names(client: APIClient, query: dict[str, str]) -> list[str]:
    response = client.get(AGENTS, {"orderBy": "displayName", **query})
    assert response.status_code == 200, response.content
    return [item["displayName"] for item in response.json()["items"]]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("displayName = quokka", ["Quokka", "Quokka Keeper"]),
        ("displayName = 'keeper'", ["Quokka Keeper"]),
        ('displayName = "keeper"', ["Quokka Keeper"]),
        # A bare value is read whole, its first and last characters too.
        ("displayName = XL", ["XL Reviewer"]),
        ("displayName=XL", ["XL Reviewer"]),
        ("publisherId = ada-labs.example", ["Quokka", "Quokka Keeper"]),
        ("publisher = 'ada-labs.example' and displayName = keeper", ["Quokka Keeper"]),
    ],
)
def test_list_filter_values_bare_or_quoted(
    client: APIClient, listed: dict[str, Persona], expression: str, expected: list[str]
) -> None:
    """VX-DISC-2, ARD Appendix A: a value is quoted ('...' or "...") or bare, and the quotes
    are not part of it; AND is read in any case."""
    assert names(client, {"filter": expression}) == expected


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_created_and_updated_after_keep_only_what_is_strictly_later(
    client: APIClient, listed: dict[str, Persona]
) -> None:
    """VX-DISC-2, ARD Appendix A: createdAfter and updatedAfter keep the entries created or
    updated strictly after the instant; an instant without an offset is UTC, handed to the
    database as such (Django warns of a naive one: an error here), and one with an offset is
    read at that offset."""
    Persona.objects.filter(pk=listed["keeper"].pk).update(
        created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z"
    )
    Persona.objects.filter(pk=listed["quokka"].pk).update(
        created_at="2026-03-01T00:00:00Z", updated_at="2026-06-01T00:00:00Z"
    )
    Persona.objects.filter(pk=listed["xl"].pk).update(
        created_at="2026-03-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z"
    )
    assert names(client, {"filter": "createdAfter > 2026-02-01"}) == ["Quokka", "XL Reviewer"]
    assert names(client, {"filter": "createdAfter > '2026-03-01T00:00:00Z'"}) == []
    # 04:00 at +05:00 is 23:00 UTC the day before: both of March's entries are later.
    assert names(client, {"filter": "createdAfter > '2026-03-01T04:00:00+05:00'"}) == [
        "Quokka",
        "XL Reviewer",
    ]
    assert names(client, {"filter": "updatedAfter > '2026-01-01T00:00:00Z'"}) == ["Quokka"]
    assert names(client, {"filter": "updatedAfter > 2026-05-31"}) == ["Quokka"]
    assert names(client, {"filter": "updatedAfter > 2026-06-01T00:00:00"}) == []


def test_the_order_by_direction_is_read_in_any_case(
    client: APIClient, listed: dict[str, Persona]
) -> None:
    """VX-DISC-2: orderBy is a field, then ASC or DESC in any case; ASC is the default."""
    ascending = ["Quokka", "Quokka Keeper", "XL Reviewer"]
    assert names(client, {}) == ascending
    assert names(client, {"orderBy": "displayName asc"}) == ascending
    assert names(client, {"orderBy": "displayName Desc"}) == ascending[::-1]
