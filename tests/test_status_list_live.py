"""The revocation status list across real web processes (VX-TRUST-7): each `virgo-web` keeps
the list it rendered, and each serves a revocation's bit from its next request, with no
message between them: the version row both read per request is the only thing shared."""

import base64
import gzip
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from personas.models import Generation, Persona, StatusListEntry
from personas.services import composition_hash, persona_revoke
from tests.deploy_support import production_env
from tests.factories import address, make_agent, make_owner, run_on_commit
from tests.live import WebServer, current_database_url

LIST = "/.well-known/status/revocation"


def bit(document: dict[str, Any], index: int) -> int:
    encoded = document["credentialSubject"]["encodedList"][1:]
    bits = gzip.decompress(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return (bits[index // 8] >> (7 - index % 8)) & 1


def unpublished_persona() -> Persona:
    """A persona and its generation written directly, so this process makes no signing key
    (the web processes make theirs, under their own key-encryption key)."""
    agent = make_agent(make_owner())
    persona = Persona.objects.create(
        uuid=uuid.uuid4(),
        agent=agent,
        name="Live",
        system_prompt="You review pull requests.",
        persona_class="coder-deputy",
        address=address("work/core/lead"),
        discoverable=True,
    )
    composition = {"persona": str(persona.uuid), "name": persona.name}
    Generation.objects.create(
        persona=persona,
        number=1,
        composition=composition,
        base_composition_hash=composition_hash(composition),
    )
    return persona


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_two_web_processes_each_serve_the_flip_on_their_next_request(
    tmp_path: Path, live_postgres: None
) -> None:
    """VX-TRUST-7: two virgo-web processes on the same database each serve the list from
    memory; after a revocation commits, each one's next answer has the bit set and a new ETag
    (the old one gets 200, not 304), and both give the same ETag."""
    persona = unpublished_persona()
    index = StatusListEntry.objects.get(generation__persona=persona).index
    # One deployment: the same secrets (so each opens the signing key the other may make),
    # a home each.
    shared = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_PROXY_SSL_HEADER="1",
        DATABASE_URL=current_database_url(),
        WEB_CONCURRENCY="1",
        VIRGO_RATE_LIMITS_PER_PROCESS="1",
    )
    del shared["REDIS_URL"]
    servers = []
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        servers.append(WebServer(home, {**shared, "VIRGO_HOME": str(home)}))
    headers = {"X-Forwarded-Proto": "https"}
    try:
        for server in servers:
            server.start()
        before = [httpx.get(s.base_url + LIST, headers=headers) for s in servers]
        for answer in before:
            assert answer.status_code == 200, answer.text
            assert bit(answer.json(), index) == 0
        # Held in memory now: the same ETag revalidates.
        for server, answer in zip(servers, before, strict=True):
            again = httpx.get(
                server.base_url + LIST, headers={**headers, "If-None-Match": answer.headers["ETag"]}
            )
            assert again.status_code == 304
        with run_on_commit():
            persona_revoke(
                persona=persona,
                actor=persona.agent.owner,
                reason_code="compromised",
                reason="live test",
                via="test",
            )
        after = [
            httpx.get(
                s.base_url + LIST, headers={**headers, "If-None-Match": answer.headers["ETag"]}
            )
            for s, answer in zip(servers, before, strict=True)
        ]
        for answer, old in zip(after, before, strict=True):
            assert answer.status_code == 200, answer.text
            assert answer.headers["ETag"] != old.headers["ETag"]
            assert bit(answer.json(), index) == 1
        # Both signed the same content with the same keys: one ETag, whichever answers.
        assert after[0].headers["ETag"] == after[1].headers["ETag"]
    finally:
        for server in servers:
            server.stop()
