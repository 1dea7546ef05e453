"""On PostgreSQL the ARD search's text and each filter are answered from an index (VX-DISC-2,
migrations personas 0010 and 0016), and explore's SQL facets give the answers a count by hand
gives (tests/test_ard_registry.py runs that comparison on both databases).

Thousands of alike listed personas (bench.data's bulk copies, marked standing) and a few that
differ, analysed; then the query the search itself sent for its page is
explained with sequential and plain index scans priced out, as the directory's test does: the
question is whether the filter's index *can* answer it, not what a small table prefers.
"""

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.search_support import analysed_fleet

# `mutation`: the search's PostgreSQL-only SQL is mutated by a run given a PostgreSQL
# (MUTATION_TESTS with DATABASE_URL, mutation/run.py); the SQLite run skips these.
pytestmark = [pytest.mark.live, pytest.mark.mutation, pytest.mark.django_db]

ALIKE = 2000
GRACE = "grace-works.example"


@pytest.fixture
def client(live_postgres: None) -> APIClient:
    # The bulk copies listed as if their stamps stood: the plans are the question here, and the
    # three that answer are made (and stamped) the real way.
    return analysed_fleet(alike=ALIKE, organization=GRACE, alike_stand=True)


def search_plan(client: APIClient, query: dict[str, Any]) -> tuple[list[str], str]:
    """The names the search found, and the plan of the query that read its page."""
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/ard/search", {"query": query}, format="json")
    assert response.status_code == 200, response.content
    [sql] = [q["sql"] for q in captured.captured_queries if "ts_rank" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        (plan,) = cursor.fetchone()
        cursor.execute("RESET enable_seqscan")
        cursor.execute("RESET enable_indexscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return sorted(entry["displayName"] for entry in response.json()["results"]), json.dumps(plan)


ZEPHYRS = ["Zephyr 0", "Zephyr 1", "Zephyr 2"]
IDENTITY = "generation_identity_gin_idx"


@pytest.mark.parametrize(
    ("words", "query_filter", "index"),
    [
        ("quokka", {}, "persona_search_document_gin_idx"),
        ("zephyr", {}, "persona_search_document_gin_idx"),
        ("benchmark", {"capabilities": "deploy-releases"}, "persona_skills_gin_idx"),
        ("benchmark", {"tags": "deployment"}, "persona_skills_gin_idx"),
        ("benchmark", {"publisher": GRACE}, "generation_proven_provider_idx"),
        ("benchmark", {"metadata.virgo.organization.domain": GRACE}, IDENTITY),
        ("benchmark", {"metadata.virgo.owner.issuer": "https://id.example.org"}, IDENTITY),
        ("benchmark", {"trustManifest.attestations.type": "owner-oidc"}, IDENTITY),
    ],
)  # fmt: skip
def test_the_text_and_each_filter_read_their_index(
    client: APIClient, words: str, query_filter: dict[str, Any], index: str
) -> None:
    """VX-DISC-2: the text by the search-document GIN index, skill ids and tags by the skills'
    GIN index, the publisher by the provider expression index, the identity chain's fields by
    its GIN index. With the filters the text is one every alike persona holds (their
    description's "benchmark"), so it is the filter that narrows."""
    query: dict[str, Any] = {"text": words}
    if query_filter:
        query["filter"] = query_filter
    found, plan = search_plan(client, query)
    assert f'"Index Name": "{index}"' in plan, plan
    if not query_filter:
        assert found == ZEPHYRS


def test_the_identifier_filter_reads_the_uuid_index(client: APIClient) -> None:
    """VX-DISC-2: trustManifest.identity is the persona's key by equality, not a text compare."""
    first = client.post("/api/ard/search", {"query": {"text": "zephyr"}}, format="json").json()
    identifier = first["results"][0]["identifier"]
    found, plan = search_plan(
        client, {"text": "zephyr", "filter": {"trustManifest.identity": identifier}}
    )
    assert len(found) == 1
    assert "personas_persona_uuid" in plan, plan


def test_what_the_indexes_answer_is_what_the_query_names(client: APIClient) -> None:
    """VX-DISC-2: on PostgreSQL a text of several words finds a persona holding any of them, and
    the identity chain's containment finds the personas whose chain holds the value at the
    path, and no others: Grace's deployers by her proven domain, none by another."""

    def found(query: dict[str, Any]) -> list[str]:
        return search_plan(client, query)[0]

    assert found({"text": "zephyr quokka"}) == ZEPHYRS
    assert found({"text": "unheard-of quokka"}) == ZEPHYRS
    domain = "metadata.virgo.organization.domain"
    assert found({"text": "quokka", "filter": {domain: GRACE}}) == ZEPHYRS
    assert found({"text": "quokka", "filter": {domain: "elsewhere.example"}}) == []
