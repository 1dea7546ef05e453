"""On PostgreSQL each directory filter is answered from its index (VX-DIR-1, migration 0010).

Thousands of alike personas (bench.data's bulk copies) and a few that differ, analysed; then
the query the directory itself sent for a page is explained, and its plan must read the
filter's index. Sequential scans, and index scans that walk the keys in order, are priced out
(enable_seqscan, enable_indexscan off): on a table this small the planner may rightly prefer
to walk the persona key and filter every row, and the question here is whether the filter's
index *can* answer it. A filter whose SQL no index matches (as Django's own icontains,
UPPER(name) LIKE, matches none) leaves only bitmaps of the whole discoverable index.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.search_support import analysed_fleet

pytestmark = [pytest.mark.live, pytest.mark.django_db]

ALIKE = 3000


@pytest.fixture
def client(live_postgres: None) -> APIClient:
    return analysed_fleet(alike=ALIKE, organization="grace-works.example")


def page_plan(client: APIClient, query: str) -> tuple[list[str], str]:
    """The names on the first page for `query`, and the plan of the query that read them."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/api/directory/?{query}")
    assert response.status_code == 200, response.content
    [sql] = [q["sql"] for q in captured.captured_queries if "personas_persona" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        (plan,) = cursor.fetchone()
        cursor.execute("RESET enable_seqscan")
        cursor.execute("RESET enable_indexscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return [entry["name"] for entry in response.json()["results"]], json.dumps(plan)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("skill=deploy-releases", "persona_skills_gin_idx"),
        ("tag=deployment", "persona_skills_gin_idx"),
        ("q=quokka", "persona_description_trgm_idx"),
        ("q=zephyr", "persona_name_trgm_idx"),
        ("provider=grace-works.example", "generation_proven_provider_idx"),
    ],
)
def test_each_filter_reads_its_index(client: APIClient, query: str, index: str) -> None:
    """VX-DIR-1: skill ids and tags by the GIN index on skills, words by the trigram indexes
    on name and description, the provider by the expression index on the generations."""
    found, plan = page_plan(client, query)
    assert found == ["Zephyr 0", "Zephyr 1", "Zephyr 2"]
    assert f'"Index Name": "{index}"' in plan, plan


def test_filters_combined_read_their_indexes(client: APIClient) -> None:
    """VX-DIR-1: a `skill` + `q` query (the bench's) is answered from indexes too."""
    found, plan = page_plan(client, "skill=deploy-releases&q=quokka+zephyr")
    assert found == ["Zephyr 0", "Zephyr 1", "Zephyr 2"]
    assert any(
        f'"Index Name": "{index}"' in plan
        for index in ("persona_skills_gin_idx", "persona_name_trgm_idx")
    ), plan
