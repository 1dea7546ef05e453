"""A frozen Redis (SIGSTOP) holds no request up past its bound, and answers no 500 (VX-REL-1);
once Redis answers again, the limits count in it again (VX-REL-2).

A frozen server is worse than a stopped one: connections are still accepted, nothing is ever
answered, so only timeouts end a call. Here a private redis-server is frozen while this process
makes owner writes, reads cards, asks for tokens and probes /readyz, with the cache and the
broker configured as production configures them (virgo.settings).
"""

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from personas.models import PersonaClass
from settling.reconciliation import owed_personas
from tests.factories import (
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
)
from tests.fault_support import frozen
from tests.live import RedisServer, celery_publishing_to
from tests.owner_clients import PASSWORD, token_client
from virgo.settings import redis_cache

pytestmark = [pytest.mark.live, pytest.mark.django_db]

LEAD = PersonaClass.PROJECT_LEAD
# The first write to meet a frozen Redis pays its timeouts (settings): the limiter's read, and
# the broker's publish with its retry (up to three reads). Everything after it, within
# VIRGO_DEGRADED_RETRY_SECONDS, goes without Redis at once: a call that waited for it at all
# would have taken REDIS_TIMEOUT.
FIRST_CALL_BOUND = 2 * settings.REDIS_CONNECT_TIMEOUT + 4 * settings.REDIS_TIMEOUT + 1.0
LATER_CALL_BOUND = settings.REDIS_TIMEOUT


@pytest.fixture
def redis_settings(settings: Settings, private_redis: RedisServer) -> Iterator[RedisServer]:
    settings.CACHES = {"default": redis_cache(private_redis.url)}
    settings.VIRGO_DEGRADED_RETRY_SECONDS = 30
    with celery_publishing_to(private_redis.url):
        yield private_redis


def timed(call: Any) -> tuple[Any, float]:
    """The answer, and how long it took, the work after the commit included."""
    started = time.monotonic()
    with run_on_commit():
        answer = call()
    return answer, time.monotonic() - started


def test_owner_writes_cards_tokens_and_readyz_while_redis_is_frozen(
    redis_settings: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REL-1: with Redis frozen, writes are kept and answered 200, the first within the
    timeouts and the next ones at once; a card is served; the token endpoint answers 503 with
    Retry-After; /readyz answers 503 within its bound, naming the cache and the broker."""
    persona = make_persona(make_agent(make_owner()), persona_class=LEAD, discoverable=True)
    owner = persona.agent.owner
    client = token_client(owner)
    assert client.get(persona.card_path).status_code == 200

    assert "complete" in persona.verb_subset
    # A narrowing write, made at once (a widening one would wait for the owner: VX-REV-1).
    with frozen(redis_settings), caplog.at_level(logging.WARNING):
        first, first_seconds = timed(
            lambda: client.patch(
                f"/api/personas/{persona.uuid}/",
                {"verb_subset": [verb for verb in persona.verb_subset if verb != "complete"]},
                format="json",
            )
        )
        later = [
            timed(
                lambda n=n: client.patch(
                    f"/api/personas/{persona.uuid}/", {"name": f"Lead {n}"}, format="json"
                )
            )
            for n in range(3)
        ]
        card, card_seconds = timed(lambda: Client().get(persona.card_path))
        token, token_seconds = timed(
            lambda: APIClient().post(
                "/api/auth/token/",
                {"username": owner.username, "password": PASSWORD},
                format="json",
            )
        )
        ready, ready_seconds = timed(lambda: Client().get("/readyz"))

    assert first.status_code == 200, first.content
    assert first_seconds < FIRST_CALL_BOUND, first_seconds
    assert [answer.status_code for answer, _ in later] == [200, 200, 200]
    assert max(seconds for _, seconds in later) < LATER_CALL_BOUND, later
    persona.refresh_from_db()
    # Each kept change made its generation.
    assert (persona.generation, persona.name) == (5, "Lead 2")
    assert list(owed_personas()) == [persona]

    assert card.status_code == 200
    assert json.loads(card.content)["name"] == "Lead 2"
    assert card_seconds < LATER_CALL_BOUND, card_seconds

    assert token.status_code == 503
    assert token.json()["code"] == "signin_unavailable"
    assert int(token["Retry-After"]) > 0
    assert token_seconds < LATER_CALL_BOUND, token_seconds

    assert ready.status_code == 503
    body = json.loads(ready.content)
    assert body["checks"]["database"] == "ok"
    assert set(body["failed"]) == {"cache", "broker"}
    assert ready_seconds < settings.VIRGO_READYZ_TIMEOUT_SECONDS + 1.0, ready_seconds

    assert caplog.text.count("Redis (the cache) is unreachable") == 1
    assert caplog.text.count("Redis (the Celery broker) is unreachable") == 1


def test_the_limits_count_in_redis_again_once_it_answers(
    redis_settings: RedisServer, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REL-1, VX-REL-2: a write made while Redis is stopped is counted in this process; once
    Redis is back, the first try after VIRGO_DEGRADED_RETRY_SECONDS finds it, the count is
    shared again, and the return is logged."""
    settings.VIRGO_DEGRADED_RETRY_SECONDS = 1
    persona = make_persona(make_agent(make_owner()), persona_class=LEAD)
    client = token_client(persona.agent.owner)
    path = f"/api/personas/{persona.uuid}/"
    shared = redis.Redis.from_url(redis_settings.url)

    redis_settings.stop()
    with caplog.at_level(logging.INFO, logger="virgo.outages"):
        assert client.patch(path, {"description": "while away"}, format="json").status_code == 200
        redis_settings.start()
        time.sleep(settings.VIRGO_DEGRADED_RETRY_SECONDS + 0.2)
        assert client.patch(path, {"description": "once back"}, format="json").status_code == 200
    assert "Redis (the cache) is unreachable" in caplog.text
    assert "Redis (the cache) is reachable again" in caplog.text
    assert any(b"rl:" in key for key in shared.scan_iter()), "the second write was counted in Redis"
    shared.close()
