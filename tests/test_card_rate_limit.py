"""The public card endpoint is rate-limited per source IP (SPEC-0009 "Rate Limiting")."""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client, RequestFactory
from django_ratelimit.core import get_usage

from cards.models import PublishedCard
from cards.views import RATE_LIMIT_GROUP
from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

MISSING_PATH = "/a/00000000-0000-4000-8000-000000000000/.well-known/agent-card.json"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), discoverable=True)


def card_path(persona: Persona) -> str:
    return f"/a/{persona.uuid}/.well-known/agent-card.json"


def address_with_time_left(rate: str, at_least: int = 30) -> str:
    """A documentation-range IP whose rate-limit window has `at_least` seconds to run.

    django-ratelimit staggers each key's window by a hash of the key; picking an address whose
    window is not about to roll over keeps a burst of requests inside one window.
    """
    for last in range(1, 255):
        address = f"198.51.100.{last}"
        request = RequestFactory().get("/", REMOTE_ADDR=address)
        usage = get_usage(request, group=RATE_LIMIT_GROUP, key="ip", rate=rate)
        assert usage is not None
        if usage["time_left"] >= at_least:
            return address
    raise AssertionError("no address with a long enough window")


def test_the_61st_request_in_a_minute_gets_429_while_another_ip_gets_200(
    persona: Persona, settings: Any
) -> None:
    """S9-RL-1: the default 60 requests per minute per source IP; the 61st gets 429 with
    Retry-After and a JSON reason, and a different address is served as before."""
    assert settings.VIRGO_CARD_RATE_LIMIT == "60/m"
    address = address_with_time_left("60/m")
    client = Client(REMOTE_ADDR=address)
    for _ in range(60):
        assert client.get(card_path(persona)).status_code == 200
    limited = client.get(card_path(persona))
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert limited["Content-Type"] == "application/json"
    assert json.loads(limited.content) == {
        "detail": "Too many card requests from this address.",
        "code": "rate_limited",
    }
    other = Client(REMOTE_ADDR="192.0.2.44").get(card_path(persona))
    assert other.status_code == 200


def test_200_304_404_and_405_all_count(persona: Persona, settings: Any) -> None:
    """S9-RL-1: enumeration (404s) and revalidation (304s) spend the same budget as reads."""
    settings.VIRGO_CARD_RATE_LIMIT = "4/m"
    address = address_with_time_left("4/m")
    client = Client(REMOTE_ADDR=address)
    etag = PublishedCard.objects.get(persona=persona).etag
    assert client.get(card_path(persona)).status_code == 200
    assert client.get(card_path(persona), headers={"If-None-Match": etag}).status_code == 304
    assert client.get(MISSING_PATH).status_code == 404
    assert client.post(card_path(persona)).status_code == 405
    assert client.get(f"/a/{uuid.uuid4()}/.well-known/agent-card.json").status_code == 429
    assert client.get(card_path(persona)).status_code == 429


def test_a_limited_request_never_reaches_the_database(
    persona: Persona, settings: Any, django_assert_num_queries: Any
) -> None:
    """S9-RL-1: the limit is checked before the persona lookup."""
    settings.VIRGO_CARD_RATE_LIMIT = "1/m"
    client = Client(REMOTE_ADDR=address_with_time_left("1/m"))
    assert client.get(card_path(persona)).status_code == 200
    with django_assert_num_queries(0):
        assert client.get(card_path(persona)).status_code == 429


@pytest.mark.live
@pytest.mark.mutation
def test_the_limit_counts_in_redis_as_production_does(
    persona: Persona, settings: Any, test_redis_url: str
) -> None:
    """S9-RL-1: on the shared Redis cache (django-redis, as with REDIS_URL) the count is kept
    where every worker process sees it."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": test_redis_url,
            "KEY_PREFIX": f"card-rate-{uuid.uuid4().hex}",
        }
    }
    settings.VIRGO_CARD_RATE_LIMIT = "3/m"
    address = address_with_time_left("3/m")
    for _ in range(3):
        # A new client each time: nothing but the shared cache connects the requests.
        assert Client(REMOTE_ADDR=address).get(card_path(persona)).status_code == 200
    assert Client(REMOTE_ADDR=address).get(card_path(persona)).status_code == 429
    assert Client(REMOTE_ADDR="192.0.2.45").get(card_path(persona)).status_code == 200
