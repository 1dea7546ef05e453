"""ARD v0.91 (2026-08-26), tested from its text where the conformance tool reachable here
predates it (VX-DISC-4): `/.well-known/ard.json` and `rel="ard"` (§5.1), with `ai-catalog.json`
kept as the predecessor; `GET /agents/{identifier}` (§5.3.4): the identifier one percent-encoded
path segment, an exact and case-sensitive lookup in this registry alone, the entry without
`score` or `source`, 400 INVALID_ARGUMENT and 404 NOT_FOUND in Appendix B's words."""

import json
import re
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db

ARD = "/.well-known/ard.json"
CATALOG = "/.well-known/ai-catalog.json"
AGENTS = "/api/ard/agents"
# The OpenAPI document's identifier pattern (ard.openapi.yaml, ArdEntry.identifier).
IDENTIFIER = re.compile(r"^urn:air:[a-zA-Z0-9.-]+(:[a-zA-Z0-9._-]+)+$")


@pytest.fixture
def client() -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_owner()).key}")
    return client


@pytest.fixture
def listed() -> Persona:
    return make_persona(make_agent(make_owner("ada", organization="ada-labs.example")),
                        name="Quokka Keeper", discoverable=True)  # fmt: skip


def lookup(client: APIClient, identifier: str, **headers: str) -> Any:
    return client.get(f"{AGENTS}/{quote(identifier, safe='')}", **headers)


def test_ard_json_is_the_documents_path_and_the_catalog_its_predecessor() -> None:
    """VX-DISC-4: `/.well-known/ard.json` answers the document a v0.91 consumer MUST fetch: an
    `entries` array whose every entry has an identifier of the pattern, a displayName, a type
    and exactly one of url and data; the predecessor path answers the same entries as the AI
    Catalog's media type. Both revalidate, and both are read-only."""
    ard, catalog = Client().get(ARD), Client().get(CATALOG)
    assert ard.status_code == catalog.status_code == 200
    assert ard["Content-Type"] == "application/json"
    assert catalog["Content-Type"] == "application/ai-catalog+json"
    document = json.loads(ard.content)
    assert document["entries"] == json.loads(catalog.content)["entries"]
    for entry in document["entries"]:
        assert IDENTIFIER.match(entry["identifier"]), entry
        assert entry["displayName"] and entry["type"]
        assert ("url" in entry) != ("data" in entry)
    assert Client().get(ARD, HTTP_IF_NONE_MATCH=ard["ETag"]).status_code == 304
    assert Client().post(ARD).status_code == 405


def test_the_landing_page_and_robots_point_at_ard_json(settings: Any) -> None:
    """VX-DISC-4: the `rel="ard"` link v0.91 consumers honour, in the page and in a Link header,
    beside the predecessor's; robots.txt names ard.json first."""
    settings.VIRGO_PUBLIC_BASE_URL = "https://virgo.example.net"
    landing = Client().get("/")
    assert '<link rel="ard" href="/.well-known/ard.json">' in landing.content.decode()
    links = landing["Link"].split(", ")
    assert links[0] == '</.well-known/ard.json>; rel="ard"'
    assert links[1].startswith('</.well-known/ai-catalog.json>; rel="ai-catalog"')
    robots = Client().get("/robots.txt").content.decode().splitlines()
    maps = [line for line in robots if line.startswith("Agentmap: ")]
    assert maps == [
        "Agentmap: https://virgo.example.net/.well-known/ard.json",
        "Agentmap: https://virgo.example.net/.well-known/ai-catalog.json",
    ]


def test_an_entry_is_found_by_its_identifier(client: APIClient, listed: Persona) -> None:
    """VX-DISC-4: the identifier from the list, percent-encoded as one segment, answers the same
    entry without `score` or `source`, with a validator that answers 304."""
    [item] = client.get(AGENTS).json()["items"]
    found = lookup(client, item["identifier"])
    assert found.status_code == 200, found.content
    assert found.json() == item
    assert "score" not in found.json() and "source" not in found.json()
    assert found["Cache-Control"] == "private, no-cache"
    again = lookup(client, item["identifier"], HTTP_IF_NONE_MATCH=found["ETag"])
    assert again.status_code == 304


@pytest.mark.parametrize(
    ("identifier", "status", "code"),
    [
        ("not-a-valid-ard-urn", 400, "INVALID_ARGUMENT"),
        ("urn:air:a/b:virgo-persona:x", 400, "INVALID_ARGUMENT"),
        ("urn:air:ard-conformance.invalid:probe:not-found", 404, "NOT_FOUND"),
    ],
)
def test_a_bad_or_unknown_identifier_is_refused_in_ards_words(
    client: APIClient, identifier: str, status: int, code: str
) -> None:
    """VX-DISC-4: an identifier that is not one is 400 INVALID_ARGUMENT naming the field; one
    this registry does not hold is 404 NOT_FOUND; each with a message (Appendix B)."""
    refused = lookup(client, identifier)
    assert refused.status_code == status
    assert refused.json()["errorCode"] == code and refused.json()["message"]


def test_the_lookup_is_exact_and_sees_only_what_the_registry_lists(
    client: APIClient, listed: Persona
) -> None:
    """VX-DISC-4, VX-DISC-2: the identifier in another case, or with another publisher, is not
    the entry's; an unlisted persona's identifier is unknown, as it is to search; anonymous
    callers get 401 UNAUTHENTICATED."""
    [item] = client.get(AGENTS).json()["items"]
    urn = item["identifier"]
    publisher = urn.split(":")[2]
    in_upper_case = urn.replace(str(listed.uuid), str(listed.uuid).upper())
    for other in (in_upper_case, urn.replace(publisher, "virgo.example.org")):
        assert lookup(client, other).status_code == 404, other
    hidden = make_persona(listed.agent, name="Hidden", discoverable=False)
    hidden_urn = urn.replace(str(listed.uuid), str(hidden.uuid))
    assert lookup(client, hidden_urn).json()["errorCode"] == "NOT_FOUND"
    anonymous = lookup(APIClient(), urn)
    assert (anonymous.status_code, anonymous.json()["errorCode"]) == (401, "UNAUTHENTICATED")
