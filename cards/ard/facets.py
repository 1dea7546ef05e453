"""Explore's facets (ARD §7.3), counted by the database over the whole matched set.

One query answers every facet asked: the matched personas once (a CTE: PostgreSQL materializes
it when more than one facet reads it), then per facet the personas carrying each value
(GROUP BY), those under `minCount` dropped, the rest ranked by count then value, the first
`limit` returned with the total of all of them, so `otherCount` is the total less the shown.
Only the buckets shown travel, whatever the number of personas or of distinct values.

A persona counts once per value however many of its skills carry it (a tag on two of its skills
is one), as its entry lists it: `tags` are the tags of any of its skills, `capabilities` its
skill ids, `publisher` its URN's publisher (the proven domain, else this installation's host),
`type` the one entry type. Values are ordered as Python orders strings (by code point): byte
order of UTF-8, COLLATE "C" on PostgreSQL, SQLite's default BINARY.

PostgreSQL unnests the skills with jsonb_array_elements(_text); SQLite with json_each. Both give
the same answers (tests/test_ard_registry.py compares them with a count made by hand).
"""

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import CharField, QuerySet, Value

from cards.ard import entries, matching
from cards.ard.requests import Facet
from personas.models import Persona

# Each facet's values per matched persona, one row per (persona, value), distinct; `matched`
# has the columns id, skills and publisher. %(host)s is the installation's host.
_VALUES = {
    "postgresql": {
        "type": "SELECT m.id, CAST(%s AS text) AS value FROM matched m",
        "publisher": (
            "SELECT m.id, COALESCE(NULLIF(m.publisher, ''), CAST(%s AS text)) AS value"
            " FROM matched m"
        ),
        "capabilities": (
            "SELECT DISTINCT m.id, skill.value ->> 'id' AS value"
            " FROM matched m CROSS JOIN LATERAL jsonb_array_elements(m.skills) AS skill"
        ),
        "tags": (
            "SELECT DISTINCT m.id, tag.value AS value"
            " FROM matched m CROSS JOIN LATERAL jsonb_array_elements(m.skills) AS skill"
            " CROSS JOIN LATERAL jsonb_array_elements_text(skill.value -> 'tags') AS tag"
        ),
    },
    "sqlite": {
        "type": "SELECT m.id, %s AS value FROM matched m",
        "publisher": "SELECT m.id, COALESCE(NULLIF(m.publisher, ''), %s) AS value FROM matched m",
        "capabilities": (
            "SELECT DISTINCT m.id, json_extract(skill.value, '$.id') AS value"
            " FROM matched m, json_each(m.skills) AS skill"
        ),
        "tags": (
            "SELECT DISTINCT m.id, tag.value AS value"
            " FROM matched m, json_each(m.skills) AS skill,"
            " json_each(skill.value, '$.tags') AS tag"
        ),
    },
}
_ORDER = {"postgresql": 'value COLLATE "C"', "sqlite": "value"}


def _constant(facet: str) -> list[Any]:
    """The parameter of a facet's value query: the type, or the host standing in for NULL."""
    if facet == "type":
        return [entries.ENTRY_TYPE]
    if facet == "publisher":
        return [entries.installation_host()]
    return []


def facet_sql(matched: QuerySet[Persona], facets: Sequence[Facet]) -> tuple[str, list[Any]]:
    """The one query: rows of (facet, value, count, total of the counts at or above minCount)."""
    vendor = "postgresql" if connection.vendor == "postgresql" else "sqlite"
    columns = matched.order_by().values("id", "skills")
    if any(facet.field == "publisher" for facet in facets):
        columns = columns.annotate(publisher=matching.publisher_column())
    else:
        columns = columns.annotate(publisher=Value(None, output_field=CharField()))
    inner, params = columns.query.sql_with_params()
    parts: list[str] = []
    values_params: list[Any] = []
    for facet in facets:
        parts.append(
            f"SELECT CAST(%s AS text) AS facet, value, n, total FROM ("
            f" SELECT value, n, SUM(n) OVER () AS total,"
            f" ROW_NUMBER() OVER (ORDER BY n DESC, {_ORDER[vendor]}) AS position"
            f" FROM (SELECT value, COUNT(*) AS n FROM ({_VALUES[vendor][facet.field]}) AS v"
            f" WHERE value IS NOT NULL GROUP BY value HAVING COUNT(*) >= %s) AS counted"
            f") AS ranked WHERE position <= %s"
        )
        values_params += [facet.field, *_constant(facet.field), facet.min_count, facet.limit]
    sql = f"WITH matched AS ({inner}) " + " UNION ALL ".join(parts)
    return sql, [*params, *values_params]


def count_facets(matched: QuerySet[Persona], facets: Sequence[Facet]) -> dict[str, Any]:
    """ARD's facets object: per facet its buckets (count, then value) and otherCount."""
    sql, params = facet_sql(matched, facets)
    buckets: dict[str, list[dict[str, Any]]] = {facet.field: [] for facet in facets}
    totals: dict[str, int] = dict.fromkeys(buckets, 0)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for field, value, count, total in rows:
        buckets[field].append({"value": value, "count": int(count)})
        totals[field] = int(total)
    return {
        facet.field: {
            "buckets": sorted(buckets[facet.field], key=lambda b: (-b["count"], b["value"])),
            "otherCount": totals[facet.field]
            - sum(bucket["count"] for bucket in buckets[facet.field]),
        }
        for facet in facets
    }
