"""The per-IP card rate limit holds across several web worker processes that share one Redis."""

import os
import secrets
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import RequestFactory
from django_ratelimit.core import get_usage

from cards.views import RATE_LIMIT_GROUP
from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.live import RedisServer, WebServer, current_database_url

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]

WORKERS = 3
RATE = "60/m"
LIMIT = 60
REQUESTS = 75


def window_time_left(address: str) -> int:
    """Seconds left in the rate-limit window of `address` (computed here; nothing is counted)."""
    request = RequestFactory().get("/", REMOTE_ADDR=address)
    usage = get_usage(request, group=RATE_LIMIT_GROUP, key="ip", rate=RATE)
    assert usage is not None
    return usage["time_left"]


def loopback_address_with_time_left(seconds: int) -> str:
    """A loopback source address whose rate-limit window has `seconds` or more left to run.

    django-ratelimit staggers each key's fixed window by a hash of the key (here the source
    address); choosing the address keeps the whole burst inside one window.
    """
    for last in range(2, 255):
        address = f"127.0.0.{last}"
        if window_time_left(address) >= seconds:
            return address
    raise AssertionError("no loopback address with a long enough window")


def get_from(address: str, url: str) -> int:
    # A new connection per request, so each is accepted by whichever worker takes it; binding
    # the client to `address` makes it the request's source IP.
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(transport=transport, timeout=30) as client:
        return client.get(url).status_code


@pytest.fixture
def web(tmp_path: Path, private_redis: RedisServer) -> Iterator[WebServer]:
    """Several web processes on the test database, sharing a Redis for their cache."""
    local_switches = {"VIRGO_EMBEDDED", "DEBUG", "CELERY_TASK_ALWAYS_EAGER"}
    env = {key: value for key, value in os.environ.items() if key not in local_switches}
    env |= {
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "VIRGO_KEY_ENCRYPTION_KEY": ",".join(settings.VIRGO_KEY_ENCRYPTION_KEYS),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": current_database_url(),
        "REDIS_URL": private_redis.url,
        "VIRGO_HOME": str(settings.VIRGO_HOME),
        "VIRGO_CARD_RATE_LIMIT": RATE,
        "SECURE_SSL_REDIRECT": "0",
        "WEB_CONCURRENCY": str(WORKERS),
    }
    server = WebServer(tmp_path, env)
    yield server
    server.stop()


def test_sixty_card_requests_a_minute_per_ip_across_several_workers(web: WebServer) -> None:
    """S9-RL-1: exactly 60 requests per minute per source IP, counted in the shared Redis,
    however the requests spread over the web processes; another IP is served meanwhile."""
    persona: Persona = make_persona(make_agent(make_owner()), discoverable=True)
    web.start()
    path = f"/a/{persona.uuid}/.well-known/agent-card.json"
    address = loopback_address_with_time_left(45)
    time_left = window_time_left(address)

    with ThreadPoolExecutor(max_workers=10) as pool:
        burst = pool.map(lambda _: get_from(address, web.base_url + path), range(REQUESTS))
        statuses = Counter(burst)
    # A window that rolled over mid-burst would void the count (time left would have grown).
    assert window_time_left(address) <= time_left, "the burst crossed a window boundary"

    assert statuses == Counter({200: LIMIT, 429: REQUESTS - LIMIT})
    other = next(a for a in (f"127.0.0.{n}" for n in range(2, 255)) if a != address)
    assert get_from(other, web.base_url + path) == 200
    assert len(web.workers_that_served(path)) >= 2, "the burst reached more than one worker"
