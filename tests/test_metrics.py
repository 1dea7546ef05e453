"""Operators can see inside: /metrics (virgo.metrics) and the backlog /readyz reports.

Requests go through the site's whole WSGI application (the card fast path in front of Django, as
virgo-web serves it), and the counts are read back from a real scrape. The counters are the
process's own, shared by every test in it, so each test reads how much a count grew.
"""

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from kombu.exceptions import OperationalError as BrokerUnavailable
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import Client as WSGIClient

from cards.fastpath import PublicCardFastPath
from personas import services
from personas.models import Persona
from stamps.quarantine import sweep
from stamps.storage import stamp_path
from tests.factories import address, make_agent, make_owner, make_persona
from tests.owner_clients import token_client
from virgo.outages import BROKER

pytestmark = pytest.mark.django_db

CARD_ROUTE = "a/<uuid:persona_id>/.well-known/agent-card.json"
SCRAPER = "scraper-" + secrets.token_hex(8)


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> Iterator[None]:
    settings.VIRGO_METRICS_TOKEN = SCRAPER
    cache.clear()
    yield
    cache.clear()


class SiteClient(WSGIClient):
    """werkzeug's client, sending what every real server sets and it leaves out.

    Each request runs inside the test's transaction, so Django's end-of-request connection
    cleanup is held off for it, as Django's own test client does (which connects it again after
    each of its requests, so it cannot be held off once for the whole test).
    """

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("environ_base", {"REMOTE_ADDR": "198.51.100.20"})
        for signal in (request_started, request_finished):
            signal.disconnect(close_old_connections)
        try:
            return super().open(*args, **kwargs)
        finally:
            for signal in (request_started, request_finished):
                signal.connect(close_old_connections)


@pytest.fixture
def site() -> SiteClient:
    """virgo.wsgi's shape (the fast path in front of Django), inside the test's transaction."""
    return SiteClient(PublicCardFastPath(WSGIHandler()))


def scrape(site: SiteClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = site.get("/metrics", headers={"Authorization": f"Bearer {SCRAPER}"})
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def grew(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def card(persona: Persona | uuid.UUID) -> str:
    key = persona.uuid if isinstance(persona, Persona) else persona
    return f"/a/{key}/.well-known/agent-card.json"


def test_a_scrape_counts_a_real_429_from_the_card_endpoint(site: SiteClient, settings: Any) -> None:
    """The card's per-address limit refuses, and the scrape counts that 429: as a card answer,
    as a response of the card's route, and as a refusal of the card limit."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    before = scrape(site)
    settings.VIRGO_CARD_RATE_LIMIT = "2/m"
    statuses = [site.get(card(persona)).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    after = scrape(site)
    card_429 = {"status": "429", "served_by": "django"}
    assert grew(before, after, "virgo_card_responses_total", **card_429) == 1
    assert grew(before, after, "virgo_rate_limit_refusals_total", limit="card") == 1
    route = {"route": CARD_ROUTE, "method": "GET", "status": "429"}
    assert grew(before, after, "virgo_http_responses_total", **route) == 1


def test_card_answers_are_counted_by_status_and_by_who_answered(site: SiteClient) -> None:
    """200 from Django then from memory, 304 from memory, 404 for an unknown id; each counted
    once, and each as a response of the card's route."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    before = scrape(site)
    first = site.get(card(persona))
    again = site.get(card(persona))
    current = site.get(card(persona), headers={"If-None-Match": first.headers["ETag"]})
    missing = site.get(card(uuid.uuid4()))
    assert [r.status_code for r in (first, again, current, missing)] == [200, 200, 304, 404]
    after = scrape(site)
    counts = {
        (status, by): grew(before, after, "virgo_card_responses_total", status=status, served_by=by)
        for status in ("200", "304", "404")
        for by in ("django", "memory")
    }
    assert counts == {
        ("200", "django"): 1,
        ("200", "memory"): 1,
        ("304", "django"): 0,
        ("304", "memory"): 1,
        ("404", "django"): 1,
        ("404", "memory"): 0,
    }
    for status, expected in (("200", 2), ("304", 1), ("404", 1)):
        route = {"route": CARD_ROUTE, "method": "GET", "status": status}
        assert grew(before, after, "virgo_http_responses_total", **route) == expected, status


def test_requests_are_counted_by_route_method_and_status(site: SiteClient) -> None:
    """The URL pattern, never the URL: ids and unknown paths add no label values."""
    owner = make_owner()
    token = token_client(owner)._credentials["HTTP_AUTHORIZATION"]
    before = scrape(site)
    assert site.get("/api/personas/", headers={"Authorization": token}).status_code == 200
    assert site.get("/api/personas/").status_code == 401
    assert (
        site.get(f"/api/personas/{uuid.uuid4()}/", headers={"Authorization": token}).status_code
        == 404
    )
    assert site.get("/no/such/page/" + secrets.token_hex(4)).status_code == 404
    after = scrape(site)
    for route, status in (
        ("api/personas/", "200"),
        ("api/personas/", "401"),
        ("api/personas/<uuid>/", "404"),
        ("unmatched", "404"),
    ):
        labels = {"route": route, "method": "GET", "status": status}
        assert grew(before, after, "virgo_http_responses_total", **labels) == 1, labels
    assert not any("no/such/page" in str(key) for key in after)


def test_an_anonymous_or_mistaken_scrape_is_refused(site: SiteClient) -> None:
    """Anonymous: 401 with a Bearer challenge; a wrong token: 401; a signed-in owner (every
    owner is staff): 403; a superuser: the metrics."""
    anonymous = site.get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == 'Bearer realm="virgo-metrics"'
    assert "virgo_" not in anonymous.text
    wrong = site.get("/metrics", headers={"Authorization": "Bearer " + SCRAPER + "x"})
    assert wrong.status_code == 401 and "virgo_" not in wrong.text
    owner_token = token_client(make_owner())._credentials["HTTP_AUTHORIZATION"]
    assert site.get("/metrics", headers={"Authorization": owner_token}).status_code == 401
    staff = Client()
    staff.force_login(make_owner())
    refused = staff.get("/metrics")
    assert refused.status_code == 403 and b"virgo_" not in refused.content
    superuser = get_user_model().objects.create_superuser("root", password="x" * 20)
    operator = Client()
    operator.force_login(superuser)
    allowed = operator.get("/metrics")
    assert allowed.status_code == 200
    assert b"virgo_http_responses_total" in allowed.content


def test_without_a_token_configured_no_bearer_is_accepted(site: SiteClient, settings: Any) -> None:
    settings.VIRGO_METRICS_TOKEN = ""
    assert site.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401


@pytest.mark.django_db(transaction=True)
def test_readyz_and_the_scrape_report_the_owed_work(
    site: SiteClient, client: Client, settings: Any
) -> None:
    """A persona saved while its task could not run (the broker down) is owed its stamp and its
    card: /readyz reports the backlog, /metrics the same counts, and once the reconciler has
    paid them both say nothing is owed."""
    agent = make_agent(make_owner())
    verb_subset = list(make_persona(agent).verb_subset)
    # This process has just found the broker down, so the change queues no task.
    BROKER.failed("task", BrokerUnavailable("refused"))
    try:
        owed = services.persona_create(
            agent=agent,
            actor=agent.owner,
            name="Owed",
            system_prompt="Wait.",
            verb_subset=verb_subset,
            queues=["reviews"],
            persona_class="coder-deputy",
            address=address("work/core/owed").path,
        )
    finally:
        BROKER.forget()
    # /readyz counts on a thread of its own (virgo.health.BacklogCount), which sees only what
    # is committed; every probe here counts anew.
    settings.VIRGO_READYZ_BACKLOG_FRESH_SECONDS = 0
    settings.VIRGO_READYZ_BACKLOG_WAIT_SECONDS = 30
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert ready["backlog"] == {"stamp": 1, "card": 1, "recompute": 0, "signature": 0}
    samples = scrape(site)
    assert value(samples, "virgo_owed_personas", work="stamp") == 1
    assert value(samples, "virgo_owed_personas", work="card") == 1

    from settling.reconciliation import reconcile

    assert reconcile(grace=__import__("datetime").timedelta(0)).owed == [owed.pk]
    assert client.get("/readyz").json()["backlog"] == {
        "stamp": 0,
        "card": 0,
        "recompute": 0,
        "signature": 0,
    }
    assert value(scrape(site), "virgo_owed_personas", work="stamp") == 0


def test_celery_task_outcomes_are_counted(site: SiteClient) -> None:
    """Each run of a task counts its outcome (here the eager tasks of a persona's creation)."""
    before = scrape(site)
    make_persona(make_agent(make_owner()))
    after = scrape(site)
    settled = {"task": "personas.tasks.settle_persona", "outcome": "success"}
    assert grew(before, after, "virgo_celery_tasks_total", **settled) >= 1


def test_the_scrape_counts_quarantined_personas(site: SiteClient) -> None:
    """VX-OPS-4: an operator sees how many personas a broken stamp file took out of service."""
    agent = make_agent(make_owner())
    broken, _ = make_persona(agent), make_persona(agent)
    assert value(scrape(site), "virgo_quarantined_personas") == 0
    path = stamp_path(broken.uuid, broken.generation)
    path.write_bytes(path.read_bytes().replace(b'"access":"allow"', b'"access":"confirm"', 1))
    sweep()
    assert value(scrape(site), "virgo_quarantined_personas") == 1
