"""With Redis unreachable, nothing answers 500 (VX-REL-1).

Redis here is a real address nobody listens on: every connection is refused, as when the server
is stopped. The cache is configured as production configures it (virgo.settings.redis_cache),
and tasks are published to the same address, not run eagerly.
"""

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cards import fastpath
from personas.models import Persona, PersonaClass
from settling.reconciliation import owed_personas
from tests.card_support import call
from tests.factories import (
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
)
from tests.live import celery_publishing_to, free_port
from tests.owner_clients import PASSWORD, token_client
from virgo.settings import redis_cache

pytestmark = pytest.mark.django_db

LEAD = PersonaClass.PROJECT_LEAD
WARNING = "Redis (the cache) is unreachable"


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def dead_redis(settings: Settings) -> Iterator[str]:
    """The cache and the broker on a Redis address where nothing listens."""
    url = f"redis://:unused-password@127.0.0.1:{free_port()}/0"
    settings.CACHES = {"default": redis_cache(url)}
    with celery_publishing_to(url):
        yield url


def lead(**fields: Any) -> Persona:
    return make_persona(make_agent(make_owner()), persona_class=LEAD, **fields)


def test_an_owner_write_is_kept_and_answers_as_usual(
    dead_redis: str, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REL-1: the change is committed and answered 200; its stamp and card are owed, for the
    reconciler; the limiter counted it in this process."""
    persona = lead()
    client = token_client(persona.agent.owner)
    before = metric("virgo_rate_limit_fallbacks_total", limit="virgo.owner-mutation")
    # A narrowing write, made at once (a widening one would wait for the owner: VX-REV-1).
    with caplog.at_level(logging.WARNING), run_on_commit():
        response = client.patch(
            f"/api/personas/{persona.uuid}/",
            {"verb_subset": [verb for verb in persona.verb_subset if verb != "complete"]},
            format="json",
        )
    assert response.status_code == 200, response.content
    assert response.json()["generation"] == 2
    persona.refresh_from_db()
    assert persona.generation == 2
    assert list(owed_personas()) == [persona]
    assert WARNING in caplog.text
    assert "could not queue personas.tasks.settle_persona" in caplog.text
    assert metric("virgo_rate_limit_fallbacks_total", limit="virgo.owner-mutation") == before + 1
    assert "unused-password" not in caplog.text


def test_the_mutation_limit_holds_per_process_with_one_warning(
    dead_redis: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REL-1: the owner's budget is counted in this process: the fourth write of a 3/m budget
    is refused with 429 and Retry-After, and the outage is logged once, not per request."""
    settings.VIRGO_MUTATION_RATE_LIMIT = "3/m"
    persona = lead()
    client = token_client(persona.agent.owner)
    with caplog.at_level(logging.WARNING, logger="virgo.outages"):
        answers = [
            client.patch(f"/api/personas/{persona.uuid}/", {"name": f"Lead {n}"}, format="json")
            for n in range(4)
        ]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    assert 0 < int(answers[-1]["Retry-After"]) <= 60
    persona.refresh_from_db()
    assert persona.name == "Lead 2"
    assert caplog.text.count(WARNING) == 1


def test_the_password_endpoints_refuse_with_503_and_check_no_password(dead_redis: str) -> None:
    """VX-REL-1: without the shared sign-in counts, the token endpoint and the admin's sign-in
    answer 503 with Retry-After (JSON and a page), and the right password gets no token."""
    owner = make_owner()
    before = metric("virgo_unavailable_responses_total", reason="signin")
    token = APIClient().post(
        "/api/auth/token/", {"username": owner.username, "password": PASSWORD}, format="json"
    )
    assert token.status_code == 503
    assert token.json() == {
        "detail": "Sign-in is unavailable for a moment: failed sign-ins cannot be counted right "
        "now. Try again shortly.",
        "code": "signin_unavailable",
    }
    assert 0 < int(token["Retry-After"]) <= 5
    assert not Token.objects.filter(user=owner).exists()

    browser = Client()
    assert browser.get("/admin/login/").status_code == 200
    page = browser.post(
        "/admin/login/", {"username": owner.username, "password": PASSWORD, "next": "/admin/"}
    )
    assert page.status_code == 503
    assert 0 < int(page["Retry-After"]) <= 5
    assert "Sign-in is unavailable for a moment" in page.content.decode()
    assert "_auth_user_id" not in browser.session
    assert metric("virgo_unavailable_responses_total", reason="signin") == before + 2


def test_public_cards_are_served_and_still_limited_per_process(
    dead_redis: str,
    settings: Settings,
    card_app: fastpath.PublicCardFastPath,
    django_assert_num_queries: Any,
) -> None:
    """VX-REL-1: the card comes from the database, then from this process's memory, and the
    per-address limit is counted in this process."""
    settings.VIRGO_CARD_RATE_LIMIT = "3/m"
    persona = lead(discoverable=True)
    first = call(card_app, persona.card_path, address="198.51.100.20")
    assert first[0] == 200
    assert json.loads(first[2])["name"] == persona.name
    with django_assert_num_queries(0):
        again = [call(card_app, persona.card_path, address="198.51.100.20") for _ in range(3)]
    assert [status for status, _, _ in again] == [200, 200, 429]
    assert again[0][2] == first[2]
    assert again[2][1]["Retry-After"]
    assert call(card_app, persona.card_path, address="198.51.100.21")[0] == 200


def test_the_directory_is_served_and_limited_per_process(
    dead_redis: str, settings: Settings
) -> None:
    """VX-REL-1: the directory's per-principal limit is counted in this process too."""
    settings.VIRGO_DIRECTORY_RATE_LIMIT = "2/m"
    lead(discoverable=True)
    client = token_client(make_owner())
    answers = [client.get("/api/directory/") for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert len(answers[0].json()["results"]) == 1
    assert int(answers[2]["Retry-After"]) > 0


def test_unlocking_sign_in_says_redis_cannot_be_reached(dead_redis: str) -> None:
    """VX-REL-1: `virgo signin unlock` fails with a clear message, not a traceback."""
    with pytest.raises(CommandError, match="cannot be reached: nothing was lifted"):
        call_command("signin", "unlock", "--username", "ada")
