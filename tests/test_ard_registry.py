"""The AI Catalog and the ARD registry API (issue 25: VX-DISC-1, VX-DISC-2, VX-DISC-3).

These run on SQLite, whose relevance score is the documented fallback (decision 219).
"""

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cards.ard.requests import FACET_FIELDS
from cards.ard.views import ANSWERED_AS
from personas.models import Persona
from personas.services import persona_revoke
from tests.factories import (
    DEPLOYER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
    update_persona,
)

pytestmark = pytest.mark.django_db

BASE = django_settings.VIRGO_PUBLIC_BASE_URL
HOST = urlsplit(BASE).hostname
SEARCH, EXPLORE, AGENTS = "/api/ard/search", "/api/ard/explore", "/api/ard/agents"
CATALOG = "/.well-known/ai-catalog.json"
SCHEMA = json.loads(
    (Path(__file__).parent.parent / "cards" / "schemas" / "ai-catalog.schema.json").read_text()
)
ENTRY_SCHEMA = {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/catalogEntry"}
DEPLOYS = standing_verbs("coder-deputy", *DEPLOYER_VERBS)
SECURITY_HEADERS = (
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
)


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client() -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=make_owner("reader"))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def fleet() -> dict[str, Persona]:
    """Ada (proven ada-labs.example) and Grace (no proven domain: the installation publishes)."""
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    grace = make_agent(make_owner("grace", organization="", oidc=False))
    return {
        "both": make_persona(
            ada, name="Quokka Keeper", description="Feeds every quokka.", discoverable=True
        ),
        "name": make_persona(ada, name="Quokka", description="Counts.", discoverable=True),
        "described": make_persona(
            grace,
            name="Release Captain",
            description="Ships with a quokka.",
            verb_subset=DEPLOYS,
            discoverable=True,
        ),
        "unlisted": make_persona(
            grace, name="Quokka Secret", description="Quokka quokka.", discoverable=False
        ),
    }


def search(client: APIClient, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = client.post(SEARCH, body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def names(answer: dict[str, Any], key: str = "results") -> list[str]:
    return [entry["displayName"] for entry in answer[key]]


# The catalog (VX-DISC-1) -------------------------------------------------------------------------


def test_the_catalog_is_valid_ai_catalog_json_naming_the_registry_not_the_personas(
    fleet: dict[str, Persona], settings: Any
) -> None:
    """VX-DISC-1: valid against the vendored ARD schema; the host is this installation; one
    entry, the registry at the ARD API base; no persona named in it."""
    settings.VIRGO_PUBLIC_BASE_URL = "https://virgo.example.net"
    settings.VIRGO_PROVIDER_ORGANIZATION = "Virgo at virgo.example.net"
    response = Client().get(CATALOG)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/ai-catalog+json"
    document = json.loads(response.content)
    jsonschema.validate(document, SCHEMA)
    assert document["host"]["displayName"] == "Virgo at virgo.example.net"
    assert document["host"]["identifier"] == "https://virgo.example.net/"
    [registry] = document["entries"]
    assert registry["type"] == "application/ai-registry+json"
    assert registry["url"] == "https://virgo.example.net/api/ard/"
    assert registry["identifier"].startswith("urn:air:virgo.example.net:")
    for persona in fleet.values():
        assert str(persona.uuid) not in response.content.decode()
        assert persona.name not in response.content.decode()


def test_the_catalog_has_the_cards_security_headers_and_revalidates(
    fleet: dict[str, Persona],
) -> None:
    """VX-DISC-1: public, with an ETag that answers 304, every security header a card has."""
    card = Client().get(fleet["name"].card_path)
    first = Client().get(CATALOG)
    for name in SECURITY_HEADERS:
        assert first[name] == card[name], name
    assert first["Cache-Control"].startswith("public, max-age=")
    again = Client().get(CATALOG, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    assert Client().post(CATALOG).status_code == 405


def test_robots_and_the_landing_page_point_at_the_catalog(settings: Any) -> None:
    """VX-DISC-1: ARD §6.1's Agentmap line and link relation."""
    settings.VIRGO_PUBLIC_BASE_URL = "https://virgo.example.net"
    robots = Client().get("/robots.txt").content.decode()
    assert "Agentmap: https://virgo.example.net/.well-known/ai-catalog.json" in robots.splitlines()
    landing = Client().get("/").content.decode()
    assert '<link rel="ai-catalog" href="/.well-known/ai-catalog.json"' in landing


# Who may ask, and what is listed (VX-DISC-2) -----------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [("post", SEARCH), ("post", EXPLORE), ("get", AGENTS)])
def test_anonymous_callers_get_ards_401(method: str, path: str) -> None:
    """VX-DISC-2: authentication required; ARD's UNAUTHENTICATED."""
    response = getattr(APIClient(), method)(path, {}, format="json" if method == "post" else None)
    assert response.status_code == 401
    assert response.json()["errorCode"] == "UNAUTHENTICATED"


def test_only_listed_standing_unrevoked_personas_are_found(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-2: another owner's unlisted persona never appears; a revoked one leaves, as does
    one that stops standing."""
    found = names(search(client, {"query": {"text": "quokka"}}))
    assert "Quokka Secret" not in found
    assert sorted(found) == ["Quokka", "Quokka Keeper", "Release Captain"]
    owner = fleet["name"].agent.owner
    persona_revoke(
        persona=fleet["name"], actor=owner, reason_code="retired", reason="done", via="test"
    )
    Persona.objects.filter(pk=fleet["both"].pk).update(standing=False)
    assert names(search(client, {"query": {"text": "quokka"}})) == ["Release Captain"]
    listed = [item["displayName"] for item in client.get(AGENTS).json()["items"]]
    assert listed == ["Release Captain"]


def test_ranking_order_on_a_fixed_fixture(client: APIClient, fleet: dict[str, Persona]) -> None:
    """VX-DISC-2: name and description beat name alone, which beats description alone, on
    PostgreSQL's ts_rank and on the SQLite fallback (weights 3, 2, 1 over 6) alike; scores are
    integers 0-100, falling with the order; source is this registry."""
    answer = search(client, {"query": {"text": "quokka"}, "federation": "none"})
    assert names(answer) == ["Quokka Keeper", "Quokka", "Release Captain"]
    scores = [entry["score"] for entry in answer["results"]]
    assert all(isinstance(score, int) and 0 < score <= 100 for score in scores)
    assert scores[0] > scores[1] > scores[2]
    assert {entry["source"] for entry in answer["results"]} == {BASE + "/api/ard/"}
    deployment = search(client, {"query": {"text": "deployment"}})["results"]
    assert [entry["displayName"] for entry in deployment] == ["Release Captain"]
    if connection.vendor == "sqlite":
        assert scores == [66, 50, 16]
        # A skill's tag weighs 2: deployment is a tag of the Release Captain's skill.
        assert [entry["score"] for entry in deployment] == [33]
    assert search(client, {"query": {"text": "nothing-like-this"}})["results"] == []


def test_one_word_of_the_most_a_query_holds_is_enough_to_be_found(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-2: a persona answering one word of a query of sixteen (the most it may hold),
    in its description alone, is found: on the SQLite fallback it scores 100 x 1 / (6 x 16),
    which is 1, the cutoff, and two words found in a name score as one word there does."""
    absent = [f"absent{number}" for number in range(15)]
    answer = search(client, {"query": {"text": " ".join(["ships", *absent])}})
    assert names(answer) == ["Release Captain"]
    pair = search(client, {"query": {"text": "quokka keeper"}})
    assert names(pair)[0] == "Quokka Keeper"
    if connection.vendor == "sqlite":
        assert [entry["score"] for entry in answer["results"]] == [1]
        assert pair["results"][0]["score"] == 58


# Filters (ARD §7.1) ------------------------------------------------------------------------------


ALL = ["Quokka Keeper", "Quokka", "Release Captain"]


@pytest.mark.parametrize(
    ("query_filter", "expected"),
    [
        ({"type": "application/a2a-agent-card+json"}, ALL),
        ({"type": ["application/mcp-server-card+json"]}, []),
        ({"capabilities": "deploy-releases"}, ["Release Captain"]),
        ({"tags": ["deployment", "nope"]}, ["Release Captain"]),
        ({"publisher": "ada-labs.example"}, ["Quokka Keeper", "Quokka"]),
        ({"publisher": [HOST]}, ["Release Captain"]),
        ({"publisher": ["ada-labs.example", HOST]}, ALL),
        ({"publisher": "ada-labs.example", "capabilities": "deploy-releases"}, []),
        ({"trustManifest.attestations.type": "owner-oidc"}, ["Quokka Keeper", "Quokka"]),
        ({"trustManifest.attestations.type": "organization-operator"}, ["Quokka Keeper", "Quokka"]),
        ({"trustManifest.attestations.type": "pinned-grant"}, ALL),
        ({"metadata.virgo.provider": "installation"}, ["Release Captain"]),
        ({"metadata.virgo.organization.domain": "ada-labs.example"}, ["Quokka Keeper", "Quokka"]),
    ],
)  # fmt: skip
def test_each_filter_rule(
    client: APIClient, fleet: dict[str, Persona], query_filter: dict[str, Any], expected: list[str]
) -> None:
    """VX-DISC-2: dot paths; OR within a key, AND across keys; a scalar is a one-value list."""
    answer = search(client, {"query": {"text": "quokka", "filter": query_filter}})
    assert names(answer) == expected


def test_the_identity_filter_finds_exactly_its_entry(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-2: trustManifest.identity (the identifier) selects one entry."""
    [entry] = search(client, {"query": {"text": "keeper"}})["results"]
    for key in ("trustManifest.identity", "identifier"):
        answer = search(client, {"query": {"text": "quokka", "filter": {key: entry["identifier"]}}})
        assert names(answer) == ["Quokka Keeper"]


# Entries and their trust manifests (VX-DISC-3) ---------------------------------------------------


def test_an_entry_is_a_valid_catalog_entry_with_a_domain_anchored_urn(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-3: urn:air:<verified domain or installation>:virgo-persona:<uuid>."""
    answer = search(client, {"query": {"text": "quokka"}})
    for entry in answer["results"]:
        jsonschema.validate({k: v for k, v in entry.items() if k not in ("score", "source")},
                            ENTRY_SCHEMA)  # fmt: skip
    by_name = {entry["displayName"]: entry for entry in answer["results"]}
    keeper, captain = by_name["Quokka Keeper"], by_name["Release Captain"]
    assert keeper["identifier"] == f"urn:air:ada-labs.example:virgo-persona:{fleet['both'].uuid}"
    assert captain["identifier"] == f"urn:air:{HOST}:virgo-persona:{fleet['described'].uuid}"
    assert keeper["type"] == "application/a2a-agent-card+json"
    assert keeper["url"] == f"{BASE}{fleet['both'].card_path}"
    assert keeper["version"] == str(fleet["both"].generation)
    assert captain["capabilities"] == [skill["id"] for skill in fleet["described"].skills]


def test_the_trust_manifest_carries_the_cards_pinned_grant_and_identity_proofs(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-3: the pinned-grant attestation's digest is the card's grantDigest, fetched from
    the card endpoint; each proven part of the identity chain is an attestation."""
    [entry] = search(client, {"query": {"text": "keeper"}})["results"]
    card = json.loads(Client().get(fleet["both"].card_path).content)
    extensions = {ext["uri"]: ext for ext in card["capabilities"]["extensions"]}
    pin = extensions["https://virgo.dev/a2a/extensions/pinned-grant/v1"]["params"]
    chain = extensions["https://virgo.dev/a2a/extensions/identity-chain/v1"]["params"]
    manifest = entry["trustManifest"]
    assert manifest["identity"] == entry["identifier"]
    attestations = {item["type"]: item for item in manifest["attestations"]}
    assert attestations["pinned-grant"]["digest"] == pin["grantDigest"]
    assert attestations["pinned-grant"]["uri"] == entry["url"]
    assert set(attestations) == {"pinned-grant", "owner-oidc", "organization-operator"}
    assert chain["owner"]["verification"] == "oidc"
    assert chain["organization"]["verification"] == "operator"
    [provenance] = manifest["provenance"]
    assert provenance["sourceDigest"] == "sha256:" + pin["stampSha256"]
    assert provenance["sourceId"].endswith(f":generation:{pin['generation']}")
    assert entry["metadata"]["virgo.organization.domain"] == "ada-labs.example"


def test_the_identifier_is_stable_across_a_rename(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-3: the URN's terminal segment is the uuid, not the name."""
    [before] = search(client, {"query": {"text": "keeper"}})["results"]
    update_persona(fleet["both"], name="Quokka Warden")
    [after] = search(client, {"query": {"text": "warden"}})["results"]
    assert after["identifier"] == before["identifier"]
    assert after["version"] != before["version"]


# Paging, bounds and attacks (VX-DISC-2) ----------------------------------------------------------


def test_search_and_list_pages_walk_every_entry_once(client: APIClient) -> None:
    """VX-DISC-2: pageSize and an opaque pageToken; no entry twice, none left out."""
    agent = make_agent(make_owner("ada"))
    made = [make_persona(agent, name=f"Quokka {n}", discoverable=True) for n in range(5)]
    seen: list[str] = []
    body: dict[str, Any] = {"query": {"text": "quokka"}, "pageSize": 2}
    while True:
        answer = search(client, body)
        seen += names(answer)
        if "pageToken" not in answer:
            break
        body = {**body, "pageToken": answer["pageToken"]}
    assert sorted(seen) == sorted(p.name for p in made)
    listed: list[str] = []
    url = AGENTS + "?pageSize=2&orderBy=displayName%20DESC"
    while url:
        page = client.get(url).json()
        listed += names(page, "items")
        token = page.get("pageToken")
        url = f"{AGENTS}?pageSize=2&orderBy=displayName%20DESC&pageToken={token}" if token else ""
    assert listed == sorted((p.name for p in made), reverse=True)


def test_a_tampered_or_foreign_page_token_is_refused(client: APIClient) -> None:
    """VX-DISC-2: a token is signed and bound to its query."""
    agent = make_agent(make_owner("ada"))
    for n in range(3):
        make_persona(agent, name=f"Quokka {n}", discoverable=True)
    token = search(client, {"query": {"text": "quokka"}, "pageSize": 1})["pageToken"]
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    for bad, body in [
        (tampered, {"query": {"text": "quokka"}}),
        (token, {"query": {"text": "quokka other"}}),
        ("not-a-token", {"query": {"text": "quokka"}}),
    ]:
        answer = search(client, {**body, "pageToken": bad}, status=400)
        assert answer["errorCode"] == "INVALID_ARGUMENT"
        assert answer["field"] == "pageToken"
    assert client.get(AGENTS + f"?pageToken={token}").status_code == 400


def filtered(query_filter: Any) -> dict[str, Any]:
    return {"query": {"text": "a", "filter": query_filter}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": {}}, "query.text"),
        ({"query": {"text": ""}}, "query.text"),
        ({"query": {"text": 7}}, "query.text"),
        ({"query": {"text": "x" * 501}}, "query.text"),
        ({"query": {"text": " ".join(f"w{n}" for n in range(17))}}, "query.text"),
        ({"query": {"text": "a\x00b"}}, "query.text"),
        (filtered({"system_prompt": "x"}), "query.filter.system_prompt"),
        (filtered({"metadata.system_prompt": "x"}), "query.filter.metadata.system_prompt"),
        (filtered({"metadata.grant_salt": "x"}), "query.filter.metadata.grant_salt"),
        (filtered({"tags": {"$ne": 1}}), "query.filter.tags"),
        (filtered({"tags": [["deep"]]}), "query.filter.tags"),
        (filtered({"tags": []}), "query.filter.tags"),
        (filtered({"tags": ["t"] * 9}), "query.filter.tags"),
        (filtered({"tags": "x" * 254}), "query.filter.tags"),
        (filtered({f"metadata.k{n}": "v" for n in range(9)}), "query.filter"),
        (filtered([]), "query.filter"),
        ({"query": {"text": "a"}, "pageSize": 0}, "pageSize"),
        ({"query": {"text": "a"}, "pageSize": 101}, "pageSize"),
        ({"query": {"text": "a"}, "pageSize": "5"}, "pageSize"),
        ({"query": {"text": "a"}, "pageSize": True}, "pageSize"),
        ({"query": {"text": "a"}, "pageToken": 5}, "pageToken"),
        ({"query": {"text": "a"}, "federation": "everywhere"}, "federation"),
        ({"query": {"text": "a"}, "orderBy": "name"}, "orderBy"),
    ],
)  # fmt: skip
def test_every_bound_is_a_400_naming_its_field(
    client: APIClient, body: dict[str, Any], field: str
) -> None:
    """VX-DISC-2: ARD's INVALID_ARGUMENT, never a 500; private fields are not filter paths."""
    answer = search(client, body, status=400)
    assert answer["errorCode"] == "INVALID_ARGUMENT"
    assert answer["field"] == field, answer


def test_a_deeply_nested_or_malformed_body_is_a_400(client: APIClient) -> None:
    """VX-DISC-2: JSON nested past the parser's depth is refused, not a RecursionError."""
    deep = '{"query": {"text": "a", "filter": {"tags": ' + "[" * 20000 + "]" * 20000 + "}}}"
    for raw in (deep, "{not json", "[]"):
        response = client.post(SEARCH, raw, content_type="application/json")
        assert response.status_code == 400, raw[:20]
        assert response.json()["errorCode"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "query",
    [
        "filter=type%20%3D",
        "filter=system_prompt%20%3D%20'x'",
        "filter=createdAfter%20%3D%20'2026-01-01'",
        "filter=createdAfter%20%3E%20'yesterday'",
        "orderBy=score",
        "pageSize=101",
        "pageSize=-1",
        "unknown=1",
        "filter=" + "%20AND%20".join(["type%20%3D%20x"] * 9),
    ],
)
def test_list_bounds_are_400s(client: APIClient, query: str) -> None:
    """VX-DISC-2: the list's filter expression, orderBy and paging are read strictly."""
    response = client.get(f"{AGENTS}?{query}")
    assert response.status_code == 400, query
    assert response.json()["errorCode"] == "INVALID_ARGUMENT"


def test_list_filter_expression(client: APIClient, fleet: dict[str, Persona]) -> None:
    """VX-DISC-2: Appendix A: comma is OR within a field, AND joins fields."""

    def listed(expression: str) -> list[str]:
        response = client.get(AGENTS, {"filter": expression, "orderBy": "displayName"})
        assert response.status_code == 200, response.content
        return names(response.json(), "items")

    assert listed(f"publisherId = 'ada-labs.example,{HOST}'") == [
        "Quokka",
        "Quokka Keeper",
        "Release Captain",
    ]
    assert listed("publisher = ada-labs.example AND displayName = 'keeper'") == ["Quokka Keeper"]
    assert listed("createdAfter > '2000-01-01T00:00:00Z' AND type = 'x'") == []


# Explore, federation, limits and cost -----------------------------------------------------------


def test_explore_counts_facets_over_the_whole_matched_set(
    client: APIClient, fleet: dict[str, Persona]
) -> None:
    """VX-DISC-2: type, tags, capabilities and publisher, with limit, minCount, otherCount."""
    body = {
        "query": {"text": "quokka"},
        "resultType": {
            "facets": [
                {"field": "type"},
                {"field": "publisher", "limit": 1},
                {"field": "capabilities", "minCount": 3},
            ]
        },
    }
    response = client.post(EXPLORE, body, format="json")
    assert response.status_code == 200, response.content
    facets = response.json()["facets"]
    assert facets["type"]["buckets"] == [{"value": "application/a2a-agent-card+json", "count": 3}]
    assert facets["publisher"] == {
        "buckets": [{"value": "ada-labs.example", "count": 2}],
        "otherCount": 1,
    }
    assert {"value": "work-todos", "count": 3} in facets["capabilities"]["buckets"]
    assert all(bucket["count"] >= 3 for bucket in facets["capabilities"]["buckets"])
    bad = client.post(EXPLORE, {"resultType": {"facets": [{"field": "grant_salt"}]}}, format="json")
    assert bad.status_code == 400
    assert bad.json()["field"] == "resultType.facets[0].field"


def _skills(*specs: tuple[str, list[str]]) -> list[dict[str, Any]]:
    return [{"id": skill, "name": skill.title(), "tags": tags} for skill, tags in specs]


def _by_hand(answer_entries: list[dict[str, Any]], facet: dict[str, Any]) -> dict[str, Any]:
    """ARD §7.3 counted over the served entries: each entry once per value it lists."""
    counts: Counter[str] = Counter()
    for entry in answer_entries:
        publisher = entry["identifier"].removeprefix("urn:air:").split(":")[0]
        counts.update(
            {
                "type": {entry["type"]},
                "tags": set(entry["tags"]),
                "capabilities": set(entry["capabilities"]),
                "publisher": {publisher},
            }[facet["field"]]
        )
    kept = sorted(
        ((value, n) for value, n in counts.items() if n >= facet.get("minCount", 1)),
        key=lambda item: (-item[1], item[0]),
    )
    limit = facet.get("limit", 20)
    return {
        "buckets": [{"value": value, "count": n} for value, n in kept[:limit]],
        "otherCount": sum(n for _, n in kept[limit:]),
    }


def test_sql_facets_equal_a_count_by_hand_with_ties_and_other_counts(client: APIClient) -> None:
    """VX-DISC-2: the database's facets (cards.ard.facets) are exactly those counted by hand over
    every entry search serves: ties broken by value in code point order ("Zeta" before "mid",
    "alpha" before "é"; a locale's collation would put "mid" first), a tag on two skills of one
    persona counted once, minCount, limit and otherCount, with and without filters."""
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    bob = make_agent(make_owner("bob", organization="bob.example"))
    grace = make_agent(make_owner("grace", organization="", oidc=False))
    catalogue = [
        (ada, _skills(("alpha", ["Zeta", "alpha"]), ("beta", ["alpha", "é"]))),
        (ada, _skills(("alpha", ["Zeta"]), ("gamma", []))),
        (bob, _skills(("beta", ["alpha", "mid"]), ("delta", ["é"]))),
        (bob, _skills(("Beta", ["Zeta", "mid"]))),
        (grace, _skills(("alpha", ["mid"]), ("beta", ["alpha"]), ("gamma", ["Zeta"]))),
        (grace, _skills(("delta", ["é", "mid"]))),
        (grace, []),
    ]
    for number, (agent, skills) in enumerate(catalogue):
        persona = make_persona(agent, name=f"Quokka {number}", discoverable=True)
        Persona.objects.filter(pk=persona.pk).update(skills=skills)
    make_persona(grace, name="Quokka hidden", discoverable=False)
    queries: list[dict[str, Any]] = [
        {"text": "quokka"},
        {"text": "quokka", "filter": {"capabilities": ["beta", "delta"]}},
        {"text": "quokka", "filter": {"publisher": ["bob.example", HOST]}},
    ]
    facet_sets: list[list[dict[str, Any]]] = [
        [{"field": "type"}, {"field": "tags"}, {"field": "capabilities"}, {"field": "publisher"}],
        [{"field": "tags", "limit": 2}, {"field": "capabilities", "limit": 1, "minCount": 2}],
        [{"field": "publisher", "limit": 1}, {"field": "tags", "minCount": 3, "limit": 1}],
        [{"field": "capabilities", "minCount": 99}, {"field": "type", "minCount": 8}],
    ]
    for query in queries:
        served: list[dict[str, Any]] = search(client, {"query": query, "pageSize": 100})["results"]
        assert served
        for requested in facet_sets:
            response = client.post(
                EXPLORE, {"query": query, "resultType": {"facets": requested}}, format="json"
            )
            assert response.status_code == 200, response.content
            answer = response.json()["facets"]
            assert answer == {facet["field"]: _by_hand(served, facet) for facet in requested}
    everything = client.post(
        EXPLORE, {"resultType": {"facets": [{"field": "tags"}]}}, format="json"
    ).json()["facets"]["tags"]
    assert everything["buckets"] == [
        {"value": "Zeta", "count": 4},
        {"value": "mid", "count": 4},
        {"value": "alpha", "count": 3},
        {"value": "é", "count": 3},
    ]
    tied = client.post(
        EXPLORE, {"resultType": {"facets": [{"field": "tags", "limit": 2}]}}, format="json"
    ).json()["facets"]["tags"]
    assert tied == {
        "buckets": [{"value": "Zeta", "count": 4}, {"value": "mid", "count": 4}],
        "otherCount": 6,
    }


def test_federation_refers_only_to_configured_registries(
    client: APIClient, fleet: dict[str, Persona], settings: Any
) -> None:
    """VX-DISC-2: no referral unless configured; `auto` is answered as referrals, and says so."""
    plain = client.post(SEARCH, {"query": {"text": "quokka"}}, format="json")
    assert "referrals" not in plain.json()
    assert plain[ANSWERED_AS] == "referrals"
    settings.VIRGO_ARD_REFERRALS = ["https://finder.example.org/api/"]
    answer = client.post(SEARCH, {"query": {"text": "quokka"}, "federation": "auto"}, format="json")
    assert answer.json()["referrals"] == [
        {
            "identifier": "urn:air:finder.example.org:registry",
            "displayName": "finder.example.org",
            "type": "application/ai-registry+json",
            "url": "https://finder.example.org/api/",
        }
    ]
    none = client.post(SEARCH, {"query": {"text": "quokka"}, "federation": "none"}, format="json")
    assert "referrals" not in none.json() and none[ANSWERED_AS] == "none"


def test_the_registry_shares_the_directorys_per_principal_budget(
    client: APIClient, settings: Any
) -> None:
    """VX-DISC-2: past VIRGO_DIRECTORY_RATE_LIMIT, ARD's 429 with Retry-After, whichever of the
    directory and the registry spent it."""
    settings.VIRGO_DIRECTORY_RATE_LIMIT = "2/m"
    assert client.get("/api/directory/").status_code == 200
    assert client.get(AGENTS).status_code == 200
    limited = client.post(SEARCH, {"query": {"text": "a"}}, format="json")
    assert limited.status_code == 429
    assert limited.json()["errorCode"] == "RATE_LIMIT_EXCEEDED"
    assert int(limited["Retry-After"]) >= 1


def test_a_page_costs_the_same_queries_at_any_size(client: APIClient) -> None:
    """VX-DISC-2: token authentication, the page, and its current generations: 3 queries for a
    page of 2 as for 12, whatever the trust manifests hold (SQLite), and a search's last page
    reads the peers it may federate with (VX-DISC-5); explore's facets are one."""
    agent = make_agent(make_owner("ada"))

    def counted(path: str, body: dict[str, Any] | None = None) -> int:
        with CaptureQueriesContext(connection) as queries:
            if body is None:
                assert client.get(path).status_code == 200
            else:
                assert client.post(path, body, format="json").status_code == 200
        return len(queries)

    every_facet = {"resultType": {"facets": [{"field": f} for f in FACET_FIELDS]}}
    for _ in range(2):
        make_persona(agent, name="Quokka", discoverable=True)
    small = [
        counted(SEARCH, {"query": {"text": "quokka"}, "pageSize": 20}),
        counted(AGENTS),
        counted(EXPLORE, every_facet),
    ]
    for _ in range(10):
        make_persona(agent, name="Quokka", discoverable=True)
    large = [
        counted(SEARCH, {"query": {"text": "quokka"}, "pageSize": 20}),
        counted(AGENTS),
        counted(EXPLORE, every_facet),
    ]
    # Explore: token authentication and one query for every facet asked.
    assert small == large == [4, 3, 2]


@pytest.mark.parametrize(
    "text",
    ["quokka", "deploy-releases", "Release notes!", "it's a\\b", "quo", "captain keeper counts"],
)
def test_the_text_match_removes_no_result_the_ranking_gives(
    fleet: dict[str, Persona], text: str
) -> None:
    """VX-DISC-2: the indexable text match (cards.ard.matching.TextMatches: any lexeme of the
    words) keeps every persona ts_rank scores at 1 or more, with the same score: hyphenated
    words, punctuation, quotes and backslashes included (on SQLite it holds for all)."""
    from cards.ard import matching
    from cards.ard.requests import read_search

    words = read_search({"query": {"text": text}}).query.words
    listed = matching.registry_personas()
    unmatched = (
        listed.annotate(score=matching.Relevance(words))
        .filter(score__gte=1)
        .order_by("-score", "id")
    )
    assert list(matching.ranked(listed, words).values_list("id", "score")) == list(
        unmatched.values_list("id", "score")
    )
