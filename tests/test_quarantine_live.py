"""One altered and one missing stamp file among several personas, against real processes.

virgo-web (two workers, then a second server), a Celery worker and beat (the verification
sweep every second), `migrate`, `virgo launch` and `virgo mcp serve`, on the PostgreSQL test
database and a Redis of the test's own: the altered persona is quarantined as every web process
sees it, the missing file is left alone by the sweep (a file this machine never wrote is no
finding, VX-SCALE-2) and materialised from the stored stamp when its persona launches, and
everything else starts, serves and launches (VX-OPS-4).
"""

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from rest_framework.authtoken.models import Token

from personas.models import AuditEvent, Persona
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona
from tests.live import (
    REPO,
    CeleryProcesses,
    WebServer,
    wait_until,
)
from tests.web_support import deployment_env, every_worker_answers, get, manage

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


def list_tools(env: dict[str, str], persona: Persona) -> list[str]:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "serve", "--persona", str(persona.uuid)],
        env=env,
        cwd=str(REPO),
    )

    async def scenario() -> list[str]:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    return anyio.run(scenario)


def test_an_altered_and_a_lost_stamp_among_several_personas(
    celery_processes: CeleryProcesses, servers: list[WebServer], tmp_path: Path
) -> None:
    """VX-OPS-4: with an altered and a lost stamp file among four personas, migrate, a Celery
    worker and beat, and a second virgo-web start; the sweep quarantines the altered one (its
    card withdrawn on both workers of the web server that was serving it and on the new server,
    out of the directory, launch and MCP refusing with the reason, an ERROR line, an audit
    event) and rewrites the lost file; the other three keep serving and launching."""
    agent = make_agent(make_owner("olivia"))
    fleet = {
        name: make_persona(agent, name=name, discoverable=True)
        for name in ("Altered", "Lost", "Kept", "Other")
    }
    altered, lost = fleet["Altered"], fleet["Lost"]
    reader = make_owner("reader")
    token = Token.objects.create(user=reader).key
    env = deployment_env(celery_processes.broker)

    (tmp_path / "first").mkdir()
    first = WebServer(tmp_path / "first", {**env, "WEB_CONCURRENCY": "2"})
    servers.append(first)
    first.start()
    # Both workers hold the altered persona's card in memory, served as standing.
    every_worker_answers(first, altered.card_path, 200, workers=2)

    altered_path = stamp_path(altered.uuid, 1)
    altered_path.write_bytes(altered_path.read_bytes().replace(b'"allow"', b'"confirm"', 1))
    lost_path = stamp_path(lost.uuid, 1)
    lost_path.unlink()

    # With both files broken, everything starts and serves the other personas.
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    launched = manage(env, "launch", "--persona", str(fleet["Kept"].uuid), "--print-allowlist")
    assert launched.returncode == 0, launched.stderr
    assert "mcp__virgo__workspace_list" in launched.stdout
    (tmp_path / "second").mkdir()
    second = WebServer(tmp_path / "second", {**env, "WEB_CONCURRENCY": "1"})
    servers.append(second)
    second.start()
    worker = celery_processes.worker()
    celery_processes.beat(VIRGO_STAMP_VERIFY_INTERVAL_SECONDS="1")

    wait_until(
        lambda: Persona.objects.get(pk=altered.pk).standing is False,
        what="the sweep to quarantine the altered persona",
    )
    assert not lost_path.exists()
    assert Persona.objects.get(pk=lost.pk).standing is True

    # The token moved in the quarantine's transaction and again once it committed.
    wait_until(lambda: get(first, altered.card_path) == 404, what="the card to be withdrawn")
    every_worker_answers(first, altered.card_path, 404, workers=2)
    every_worker_answers(second, altered.card_path, 404, workers=1)
    for name in ("Lost", "Kept", "Other"):
        every_worker_answers(first, fleet[name].card_path, 200, workers=2)
        every_worker_answers(second, fleet[name].card_path, 200, workers=1)
    for server in (first, second):
        with httpx.Client(timeout=30) as client:
            directory = client.get(
                server.base_url + "/api/directory/", headers={"Authorization": f"Token {token}"}
            )
        assert directory.status_code == 200
        assert {entry["name"] for entry in directory.json()["results"]} == {
            "Lost",
            "Kept",
            "Other",
        }

    refused = manage(env, "launch", "--persona", str(altered.uuid), "--print-allowlist")
    assert refused.returncode != 0
    assert f"refusing to launch persona {altered.uuid}" in refused.stderr
    assert "quarantined by the verification sweep" in refused.stderr
    assert f"stamp file {altered_path} was altered" in refused.stderr
    served = manage(env, "mcp", "serve", "--persona", str(altered.uuid))
    assert served.returncode != 0
    assert f"refusing to serve persona {altered.uuid}" in served.stderr
    assert "quarantined" in served.stderr
    for name in ("Lost", "Kept", "Other"):
        allowlist = manage(env, "launch", "--persona", str(fleet[name].uuid), "--print-allowlist")
        assert allowlist.returncode == 0, allowlist.stderr
        names = [tool.removeprefix("mcp__virgo__") for tool in allowlist.stdout.strip().split(",")]
        assert list_tools(env, fleet[name]) == names

    log = worker.log.read_text(errors="replace")
    assert f"persona 'Altered' ({altered.uuid}) generation 1: stamp quarantined" in log
    assert str(lost_path) not in log
    # Launched above: materialised from the stored stamp where it ran, with no repair recorded.
    assert lost_path.read_bytes() == CapabilityStamp.objects.get(persona_uuid=lost.uuid).data
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED)
    assert (event.persona_id, event.data["path"]) == (altered.pk, str(altered_path))
