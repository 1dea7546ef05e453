"""Signed cards against real processes: virgo-web as `make serve` runs it, and a rotation whose
Celery worker is SIGKILLed half-way, finished by the reconciler.

PostgreSQL test database and a Redis of each test's own; nothing is mocked.
"""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.signing import InvalidSignaturesError
from django.core.management import call_command
from django.test import Client

from cards import keys
from cards.models import PublishedCard, SigningKey
from cards.publishing import cards_owed_signatures
from cards.signing import current_marker
from tests.card_lock_support import a_backend_waits_to_publish_cards, card_row_held
from tests.factories import make_agent, make_owner, make_persona
from tests.live import CeleryProcesses, WebServer, celery_publishing_to, wait_until
from tests.signing_support import peer_verifier, protected_header
from tests.web_support import deployment_env

ENDPOINTS = Path(__file__).resolve().parent.parent / "docs" / "endpoints.md"


def readme_verification_snippet() -> str:
    """The Python block after "**Verifying a card.**" in docs/endpoints.md, as a peer would
    paste it."""
    text = ENDPOINTS.read_text()
    after = text[text.index("**Verifying a card.**") :]
    start = after.index("```python\n") + len("```python\n")
    return after[start : after.index("```", start)]


pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]


def test_a_card_from_virgo_web_verifies_against_the_jwks_of_the_same_server(
    celery_processes: CeleryProcesses, tmp_path: Path, settings: Any
) -> None:
    """VX-TRUST-1, VX-TRUST-2: virgo-web (two worker processes, production settings, Redis)
    serves a card in a non-Latin script; the a2a-sdk's verifier, given only the JWKS fetched from
    that same server, accepts it, on both processes, from the database and from memory; its jku
    names that server's own JWKS; one changed byte fails. docs/endpoints.md's snippet for peers does
    the same when pasted."""
    server = WebServer(
        tmp_path, {**deployment_env(celery_processes.broker), "WEB_CONCURRENCY": "2"}
    )
    # One installation, one public base URL (VX-SCALE-4): the card is published here under the
    # server's.
    server.env["VIRGO_PUBLIC_BASE_URL"] = settings.VIRGO_PUBLIC_BASE_URL = server.base_url
    agent = make_agent(make_owner())
    persona = make_persona(agent, discoverable=True, name="Рецензент 🦊", description="レビュー")
    server.start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            jwks = client.get("/.well-known/jwks.json")
            assert jwks.status_code == 200
            assert jwks.headers["Cache-Control"].startswith("public")
            verify = peer_verifier(jwks.json())
            bodies = set()
            sent = 0
            # A connection per request, until both worker processes have answered: the kernel
            # hands each to whichever accepts first, so a few in a row may all reach one.
            while sent < 8 or (
                len(server.workers_that_served(persona.card_path)) < 2 and sent < 400
            ):
                with httpx.Client(base_url=server.base_url, timeout=30) as fresh:
                    response = fresh.get(persona.card_path)
                sent += 1
                assert response.status_code == 200
                card = response.json()
                verify(card)
                bodies.add(response.content)
            # Signed once, at publication: every answer the same.
            assert len(bodies) == 1
            [signature] = card["signatures"]
            assert protected_header(signature)["jku"] == f"{server.base_url}/.well-known/jwks.json"
            changed = json.loads(response.content.replace("🦊".encode(), "🐺".encode()))
            with pytest.raises(InvalidSignaturesError):
                verify(changed)
        assert len(server.workers_that_served(persona.card_path)) == 2
        # docs/endpoints.md's few lines for peers, pasted as they are but for the origin and the id.
        snippet = readme_verification_snippet()
        assert '"https://virgo.example.org"' in snippet and "<persona-id>" in snippet
        pasted = snippet.replace('"https://virgo.example.org"', repr(server.base_url)).replace(
            "<persona-id>", str(persona.uuid)
        )
        ran = subprocess.run(
            [sys.executable, "-c", pasted], capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        forged = pasted.replace(".json())\ncreate", '.json() | {"name": "Forged"})\ncreate')
        assert forged != pasted
        ran = subprocess.run(
            [sys.executable, "-c", forged], capture_output=True, text=True, timeout=60
        )
        assert ran.returncode != 0 and "InvalidSignaturesError" in ran.stderr
    finally:
        server.stop()


def test_a_rotation_whose_worker_is_killed_half_way_is_finished_by_the_reconciler(
    celery_processes: CeleryProcesses,
) -> None:
    """VX-TRUST-3: a rotation fans re-signing out in ranges of at most three cards; the worker
    signs the first range and is SIGKILLed while the second waits on a card row. Some carry the new
    keys, the rest are owed; `virgo reconcile` signs the rest, and every card then verifies
    against the JWKS, signed by the new and the old key."""
    agent = make_agent(make_owner())
    fleet = [make_persona(agent, discoverable=True) for _ in range(9)]
    [old] = SigningKey.objects.filter(state="active")
    worker = celery_processes.worker(VIRGO_RESIGN_BATCH_SIZE="3")

    with card_row_held(fleet[4]):
        with celery_publishing_to(celery_processes.broker.url):
            new = keys.rotate()
        marker = current_marker()
        assert marker == " ".join(sorted([new.kid, old.kid]))
        wait_until(a_backend_waits_to_publish_cards, what="the second range to wait on its card")
        signed = set(
            PublishedCard.objects.filter(signed_by=marker).values_list("persona_id", flat=True)
        )
        assert signed == {persona.pk for persona in fleet[:3]}
        worker.kill()

    owed = set(cards_owed_signatures().values_list("persona_id", flat=True))
    assert owed == {persona.pk for persona in fleet[3:]}
    call_command("reconcile", stdout=StringIO())
    assert not cards_owed_signatures().exists()

    # An address of its own: the tests before this one in the process spent 127.0.0.1's limit.
    peer = Client(REMOTE_ADDR="192.0.2.134")
    verify = peer_verifier(json.loads(peer.get("/.well-known/jwks.json").content))
    for persona in fleet:
        card = json.loads(bytes(PublishedCard.objects.get(persona=persona).body))
        verify(card)
        assert [protected_header(s)["kid"] for s in card["signatures"]] == [new.kid, old.kid]
