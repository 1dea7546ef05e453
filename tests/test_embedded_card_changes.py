"""The embedded default, as `make run` starts it, learns of a change another process made.

A real `manage.py runserver` (the fast path in front of Django, the local-memory cache) on a
private VIRGO_HOME, and the CLI in processes of their own, as an owner runs them from another
terminal: no request after the change may be answered from what the server held before it.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.live


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class EmbeddedServer:
    """`make run`'s steps, in a home of its own, then the server itself."""

    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DATABASE_", "REDIS_", "CELERY_", "VIRGO_", "DJANGO_"))
        }
        self.env = environment | {
            "VIRGO_HOME": str(home),
            "VIRGO_PUBLIC_BASE_URL": self.base,
            # Long enough that only the shared token can explain an answer on the next request.
            "VIRGO_CARD_PROCESS_CACHE_SECONDS": "600",
            "DJANGO_SETTINGS_MODULE": "virgo.settings",
        }
        self.log = home.parent / "web.log"
        self.server: subprocess.Popen[bytes] | None = None

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "virgo.envfile", "embedded"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
        )
        self.manage("migrate", "--noinput")
        self.manage("reconcile")
        self.manage("load_demo")
        with open(self.log, "wb") as log:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "virgo.web"],
                cwd=ROOT,
                env={**self.env, "VIRGO_BIND": f"127.0.0.1:{self.port}", "WEB_CONCURRENCY": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: self._answers(), timeout=60, what="the embedded server")

    def _answers(self) -> bool:
        try:
            return get(self.base + "/healthz")[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(tmp_path / "home")
    server.start()
    yield server
    server.stop()


def demo_persona(server: EmbeddedServer) -> str:
    """The uuid of the demo's first persona, as `make run` prints its card URL."""
    listing = server.manage("shell", "--no-imports", "-c", _FIRST_PERSONA)
    return listing.strip()


_FIRST_PERSONA = (
    "from personas.models import Persona; "
    "print(Persona.objects.filter(discoverable=True).order_by('pk').first().uuid)"
)


def test_a_cli_revocation_is_answered_410_on_the_servers_next_request(
    embedded: EmbeddedServer,
) -> None:
    """VX-TRUST-6, VX-TRUST-5: the running embedded server has the card in memory (the same
    bytes on repeated requests, its entry good for ten minutes); `virgo persona revoke` from
    another process commits, and the very next request is 410 Gone."""
    persona = demo_persona(embedded)
    card_url = f"{embedded.base}/a/{persona}/.well-known/agent-card.json"
    first = get(card_url)
    assert first[0] == 200, first[1]
    assert get(card_url) == first
    embedded.manage(
        "persona",
        "revoke",
        persona,
        "--by",
        "demo",
        "--reason-code",
        "retired",
        "--reason",
        "retired from another terminal",
    )
    status, body = get(card_url)
    assert status == 410, body
    tombstone = json.loads(body)
    assert (tombstone["persona"], tombstone["scope"], tombstone["reason"]) == (
        persona,
        "persona",
        "retired",
    )


def test_a_cli_change_of_the_card_is_served_on_the_next_request(
    embedded: EmbeddedServer,
) -> None:
    """VX-TRUST-6: any card change made by another process (here the owner unlists the
    persona from a shell, as the admin's toggle does) is what the server's next request sees."""
    persona = demo_persona(embedded)
    card_url = f"{embedded.base}/a/{persona}/.well-known/agent-card.json"
    assert get(card_url)[0] == 200
    assert get(card_url)[0] == 200
    embedded.manage(
        "shell",
        "--no-imports",
        "-c",
        "from personas.models import Persona; from personas import services; "
        f"p = Persona.objects.get(uuid='{persona}'); "
        "services.persona_set_discoverable(persona=p, actor=p.agent.owner, "
        "discoverable=False, via='test')",
    )
    assert get(card_url)[0] == 404
