"""The ARD registry's search and the revocation status list at scale (issue 25), for bench.run.

Measured on the data section's personas when it runs (at 1k, and at 100k once every stamp is
built, so every persona stands and is listed), else on a fleet of its own grown the same way.
In-process, as the directory figures are: the Django test client with a token, so the figures
are the view and its queries, not HTTP.

- Search: `POST /api/ard/search` with a text query and filters that the same SEARCH_MATCHES
  personas answer at every size, pages of PAGE_SIZE followed by pageToken from the first; the
  median page time, and the most queries any page made (CaptureQueriesContext).
- Indexes: the page's query EXPLAINed with each filter alone (and the text alone), sequential
  scans disabled, naming the index the plan reads for it; and the whole query's EXPLAIN
  ANALYZE at each size, kept for the report.
- The status list at 100k personas: its bytes as served (Virgo does not compress responses; the
  bitstring inside is already gzip), what gzip would make of them, and the median GET.
"""

import gzip
import json
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

PAGE_SIZE = 10
# Walks of every page of the search; the first walk warms the caches and is not counted.
WALKS = 8
STATUS_GETS = 200
# Bits set in the list for its size figure: a revocation's write, on this share of generations.
REVOKED_SHARE = 0.01
SEARCH_PATH = "/api/ard/search"
STATUS_PATH = "/.well-known/status/revocation"
_INDEX_IN_PLAN = re.compile(
    r"(?:Index Scan|Index Only Scan) using (\w+)|Bitmap Index Scan on (\w+)"
)


@dataclass
class SearchRun:
    page_ms: float
    queries: int
    pages: int
    matches: int
    plan: str


@dataclass
class ArdBench:
    """What the section measured, size by size; `report` turns it into figures and text."""

    runs: dict[str, SearchRun] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    indexes: dict[str, list[str]] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)

    # Search ----------------------------------------------------------------------------------

    @staticmethod
    def publisher(fleet: Any) -> str:
        from personas.models import OrganizationDomain

        return OrganizationDomain.objects.get(owner=fleet.owner).domain

    def search_body(self, fleet: Any, searchable: Any) -> dict[str, Any]:
        """The text and filters only the searchable personas answer, each filter a real one:
        their skill, one of its tags, their publisher, and an attestation every entry has."""
        from bench.data import SEARCH_SKILL, SEARCH_WORD

        [tag, *_] = next(s["tags"] for s in searchable.skills if s["id"] == SEARCH_SKILL)
        filters = {
            "capabilities": SEARCH_SKILL,
            "tags": tag,
            "publisher": self.publisher(fleet),
            "trustManifest.attestations.type": "pinned-grant",
        }
        return {"query": {"text": SEARCH_WORD, "filter": filters}, "pageSize": PAGE_SIZE}

    def measure(self, fleet: Any, searchable: Any, size: str) -> None:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext
        from rest_framework.authtoken.models import Token

        if connection.vendor == "postgresql":
            # The planner's statistics as autovacuum would have them after the bulk inserts.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        token, _ = Token.objects.get_or_create(user=fleet.owner)
        client = Client(headers={"Authorization": f"Token {token.key}"})
        body = self.search_body(fleet, searchable)
        self.body = body
        timings: list[float] = []
        queries: list[int] = []
        pages = matches = 0
        for walk in range(WALKS):
            request = dict(body)
            pages = matches = 0
            while True:
                with CaptureQueriesContext(connection) as captured:
                    started = time.perf_counter()
                    response = client.post(
                        SEARCH_PATH, json.dumps(request), content_type="application/json"
                    )
                    elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    raise RuntimeError(f"ARD search answered {response.status_code}")
                answer = json.loads(response.content)
                pages += 1
                matches += len(answer["results"])
                if walk:
                    timings.append(elapsed)
                    queries.append(len(captured.captured_queries))
                if "pageToken" not in answer:
                    break
                request = {**body, "pageToken": answer["pageToken"]}
        self.runs[size] = SearchRun(
            page_ms=statistics.median(timings) * 1000,
            queries=max(queries),
            pages=pages,
            matches=matches,
            plan=self.plan(body, analyze=True),
        )
        if connection.vendor == "postgresql" and not self.indexes:
            self.indexes = self.filter_indexes(fleet, searchable, body)

    @staticmethod
    def page_queryset(body: dict[str, Any]) -> Any:
        """The page's query as SearchView makes it (cards.ard.views._matched)."""
        from cards.ard import entries
        from cards.ard.requests import read_search
        from cards.ard.views import _matched

        search = read_search(body)
        return _matched(search.query).only(*entries.PERSONA_COLUMNS)[: search.page_size + 1]

    def plan(self, body: dict[str, Any], *, analyze: bool = False, forced: bool = False) -> str:
        """The page query's plan; `forced`: with sequential and plain index scans priced out,
        as tests/test_ard_registry_postgres.py asks, so the plan shows which index *can*
        answer each condition, whatever a table's size makes the planner prefer."""
        from django.db import connection, transaction

        queryset = self.page_queryset(body)
        if connection.vendor != "postgresql":
            return queryset.explain()
        with transaction.atomic():
            if forced:
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL enable_seqscan = off")
                    cursor.execute("SET LOCAL enable_indexscan = off")
            options = {"analyze": True, "buffers": True} if analyze else {}
            return queryset.explain(**options)

    def filter_indexes(
        self, fleet: Any, searchable: Any, body: dict[str, Any]
    ) -> dict[str, list[str]]:
        """Per filter, the indexes its plan reads (forced), each with a text every persona
        holds ("benchmark") so the filter narrows; the search's own text alone; and whether
        the index meant to answer each is among them."""
        from bench.data import SEARCH_SKILL
        from cards.ard import entries

        publisher = self.publisher(fleet)
        tag = body["query"]["filter"]["tags"]
        every = "benchmark"
        cases: dict[str, tuple[dict[str, Any], str]] = {
            f"text `{body['query']['text']}`": (
                {"text": body["query"]["text"]},
                "persona_search_document_gin_idx",
            ),
            "capabilities": (
                {"text": every, "filter": {"capabilities": SEARCH_SKILL}},
                "persona_skills_gin_idx",
            ),
            "tags": ({"text": every, "filter": {"tags": tag}}, "persona_skills_gin_idx"),
            "publisher": (
                {"text": every, "filter": {"publisher": publisher}},
                "generation_proven_provider_idx",
            ),
            "trustManifest.identity": (
                {
                    "text": every,
                    "filter": {
                        "trustManifest.identity": entries.identifier(publisher, searchable.uuid)
                    },
                },
                "personas_persona_uuid",
            ),
            "trustManifest.attestations.type": (
                {
                    "text": every,
                    "filter": {"trustManifest.attestations.type": "organization-operator"},
                },
                "generation_identity_gin_idx",
            ),
            "metadata.virgo.organization.domain": (
                {"text": every, "filter": {"metadata.virgo.organization.domain": publisher}},
                "generation_identity_gin_idx",
            ),
        }
        found: dict[str, list[str]] = {}
        for name, (query, meant) in cases.items():
            plan = self.plan({"query": query, "pageSize": PAGE_SIZE}, forced=True)
            read = sorted({a or b for a, b in _INDEX_IN_PLAN.findall(plan)})
            served = any(index.startswith(meant) for index in read)
            found[name] = [f"{meant}: {'yes' if served else 'NO'}", *read]
        return found

    # The status list ---------------------------------------------------------------------------

    def measure_status_list(self, personas: int) -> None:
        """Bytes and GET time at this many personas: as it is, then with REVOKED_SHARE of the
        generations revoked through the records' write (bits and version in one transaction);
        those bits are cleared again after."""
        import random

        from django.db import transaction
        from django.utils import timezone

        from personas.models import Generation, StatusListEntry
        from personas.services.status_list import status_list_changed, status_revoke

        self.status["personas"] = personas
        self.status["clear"] = self._status_gets()
        ids = list(Generation.objects.values_list("pk", flat=True))
        chosen = random.Random(25).sample(ids, max(1, int(len(ids) * REVOKED_SHARE)))
        with transaction.atomic():
            status_revoke(generation_ids=chosen, at=timezone.now())
        try:
            self.status["revoked"] = {**self._status_gets(), "bits": len(chosen)}
        finally:
            with transaction.atomic():
                StatusListEntry.objects.filter(generation__in=chosen).update(revoked_at=None)
                status_list_changed()

    @staticmethod
    def _status_gets() -> dict[str, Any]:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        client = Client()
        started = time.perf_counter()
        first = client.get(STATUS_PATH)
        render_ms = (time.perf_counter() - started) * 1000
        if first.status_code != 200:
            raise RuntimeError(f"the status list answered {first.status_code}")
        body = first.content
        timings = []
        for _ in range(STATUS_GETS):
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(STATUS_PATH)
                timings.append(time.perf_counter() - started)
            if response.status_code != 200 or response.content != body:
                raise RuntimeError("the status list changed while it was read")
        return {
            "bytes": len(body),
            "gzip_bytes": len(gzip.compress(body, mtime=0)),
            "encoded_list_chars": len(json.loads(body)["credentialSubject"]["encodedList"]),
            "first_ms": render_ms,
            "get_ms": statistics.median(timings) * 1000,
            "queries": len(captured.captured_queries),
        }

    # Report ------------------------------------------------------------------------------------

    def figures(self) -> dict[str, float | int]:
        from bench import report

        figures: dict[str, float | int] = {}
        if "1k" in self.runs and "100k" in self.runs:
            figures["ard_search_100k_vs_1k"] = report.ratio(
                self.runs["100k"].page_ms, self.runs["1k"].page_ms
            )
        if self.runs:
            figures["ard_search_queries_per_page"] = max(run.queries for run in self.runs.values())
        if self.status:
            figures["status_list_100k_bytes"] = self.status["revoked"]["bytes"]
            figures["status_list_get_100k_ms"] = self.status["revoked"]["get_ms"]
        return figures

    def section(self) -> tuple[str, str]:
        from bench import report

        body = self.body

        search = report.table(
            ["discoverable personas", "page ms (median)", "queries/page", "pages", "matches"],
            [
                [size, f"{run.page_ms:.2f}", run.queries, run.pages, run.matches]
                for size, run in self.runs.items()
            ],
        )
        indexes = report.table(
            ["filter", "its index read", "every index the plan reads"],
            [[name, found[0], ", ".join(found[1:])] for name, found in self.indexes.items()],
        )
        text = (
            "POST /api/ard/search with a token, in-process on PostgreSQL: "
            f"`{json.dumps(body['query'])}`, pages of {PAGE_SIZE} followed by pageToken from "
            f"the first; the median over {WALKS - 1} walks (one more warms up). The same "
            "personas match at every size.\n\n"
            + search
            + "\n\nEach filter alone, beside a text every persona holds, and the text alone: "
            "the page query EXPLAINed with sequential and plain index scans priced out (as "
            "tests/test_ard_registry_postgres.py does), so the plan names the index that can "
            "answer each condition whatever the table's size makes the planner prefer. `type` "
            "and the `pinned-grant` attestation hold for every listed persona and are no "
            "condition in SQL.\n\n" + indexes
        )
        if self.status:
            clear, revoked = self.status["clear"], self.status["revoked"]
            text += (
                f"\n\nThe revocation status list at {self.status['personas']:,} personas "
                "(GET /.well-known/status/revocation, in-process, median of "
                f"{STATUS_GETS}, {revoked['queries']} query each):\n\n"
                + report.table(
                    [
                        "bits set",
                        "bytes as served",
                        "gzip of them",
                        "encodedList chars",
                        "first GET ms (render, sign)",
                        "GET ms (median)",
                    ],
                    [
                        [
                            bits,
                            f"{row['bytes']:,}",
                            f"{row['gzip_bytes']:,}",
                            f"{row['encoded_list_chars']:,}",
                            f"{row['first_ms']:.1f}",
                            f"{row['get_ms']:.2f}",
                        ]
                        for bits, row in (("0", clear), (f"{revoked['bits']:,}", revoked))
                    ],
                )
                + "\n\nVirgo serves the list uncompressed (its bits are already gzip inside); "
                "the gzip column is what a compressing proxy would send. The figures are the "
                f"list with {REVOKED_SHARE:.0%} of the generations revoked (set through "
                "personas.services.status_list.status_revoke, then cleared)."
            )
        return ("ARD registry and status list", text)

    def plans(self) -> str:
        return "\n\n".join(f"-- {size}\n{run.plan}" for size, run in self.runs.items())
