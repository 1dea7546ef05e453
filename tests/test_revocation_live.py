"""Revocation seen by every web process on its next request (VX-TRUST-5), against real ones.

Two virgo-web servers (two workers, and one) serve a listed persona's card from memory on the
PostgreSQL test database with a Redis of the test's own; the owner revokes it here, in this
process. The very next request to each worker of each server answers 410 Gone with the
tombstone, the directory no longer lists it, and `virgo launch` refuses naming the revocation.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_framework.authtoken.models import Token

from personas.services import persona_revoke
from tests.factories import make_agent, make_owner, make_persona
from tests.live import RedisServer, WebServer
from tests.web_support import (
    answers_by_worker,
    deployment_env,
    every_worker_answers,
    get,
    log_length,
    manage,
)

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]


@pytest.fixture
def servers() -> Iterator[list[WebServer]]:
    started: list[WebServer] = []
    yield started
    for server in started:
        server.stop()


def test_two_web_processes_answer_410_on_their_next_request(
    private_redis: RedisServer, servers: list[WebServer], tmp_path: Path, settings: Any
) -> None:
    """VX-TRUST-5: both servers' workers hold the card in memory; once the revocation commits,
    the next request each of them answers is 410 with the tombstone (no waiting, no stale
    card from the fast path), the directory drops the persona and launch refuses."""
    # This process moves the card tokens in the same Redis the web processes read.
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": private_redis.url}
    }
    owner = make_owner("rhea")
    persona = make_persona(make_agent(owner), name="Revoked", discoverable=True)
    kept = make_persona(persona.agent, name="Kept", discoverable=True)
    token = Token.objects.create(user=make_owner("reader")).key
    env = deployment_env(private_redis)
    started = []
    for name, workers in (("first", "2"), ("second", "1")):
        (tmp_path / name).mkdir()
        server = WebServer(tmp_path / name, {**env, "WEB_CONCURRENCY": workers})
        servers.append(server)
        server.start()
        started.append((server, int(workers)))
    for server, workers in started:
        # Asked until every worker has answered, twice each at least: the second from memory.
        every_worker_answers(server, persona.card_path, 200, workers=workers)
        every_worker_answers(server, persona.card_path, 200, workers=workers)

    revocation = persona_revoke(
        persona=persona,
        actor=owner,
        reason_code="compromised",
        reason="its host was broken into",
        via="test",
    )

    for server, workers in started:
        since = log_length(server)
        # No retry: the first answer after the commit is already the tombstone.
        with httpx.Client(timeout=30) as client:
            response = client.get(server.base_url + persona.card_path)
        assert response.status_code == 410
        tombstone = json.loads(response.content)
        assert (tombstone["persona"], tombstone["reason"]) == (str(persona.uuid), "compromised")
        assert tombstone["revokedAt"].startswith(revocation.at.strftime("%Y-%m-%dT%H:%M:%S"))
        for header in ("X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"):
            assert header in response.headers
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        every_worker_answers(server, persona.card_path, 410, workers=workers)
        assert set().union(*answers_by_worker(server, persona.card_path, since).values()) == {410}
        every_worker_answers(server, kept.card_path, 200, workers=workers)
        with httpx.Client(timeout=30) as client:
            directory = client.get(
                server.base_url + "/api/directory/", headers={"Authorization": f"Token {token}"}
            )
        assert [entry["name"] for entry in directory.json()["results"]] == ["Kept"]
        assert get(server, persona.card_path) == 410

    refused = manage(env, "launch", "--persona", str(persona.uuid), "--print-allowlist")
    assert refused.returncode != 0
    assert f"refusing to launch persona {persona.uuid}" in refused.stderr
    assert "revoked" in refused.stderr and "compromised" in refused.stderr
