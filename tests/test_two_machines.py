"""Two machines sharing one PostgreSQL and one Redis and no disk (VX-SCALE-1, VX-SCALE-2), and
one of them configured with another public base URL (VX-SCALE-4).

A "machine" is a virgo-web (one worker process) and a Celery worker on production settings, with
a VIRGO_HOME of its own. Both use the PostgreSQL test database, a Redis of the test's own, the
same SECRET_KEY, the same key-encryption key and the same release (this checkout, its static
files collected once into a directory both read). Where `unshare --mount` works (root, as in
`make test`'s container), each machine's processes and commands run in a mount namespace of
their own in which the other machine's VIRGO_HOME is an empty tmpfs, so neither can read what
the other wrote; where it does not, the two homes are only separate directories.

Nothing is mocked: cards are published by a real worker, served by real web processes and
verified by the a2a-sdk's verifier against the JWKS each machine serves.
"""

import json
import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from cards.models import PublishedCard, SigningKey
from cards.publishing import cards_owed_signatures
from personas.models import Agent, AuditEvent, Persona
from settling.reconciliation import owed_personas
from stamps.storage import STAMP_FILE_NAME
from tests.deploy_support import static_root  # noqa: F401 (the release's static files, a fixture)
from tests.factories import make_agent, make_owner, make_persona
from tests.live import (
    DEADLINE_SECONDS,
    REPO,
    CeleryProcess,
    RedisServer,
    WebServer,
    celery_publishing_to,
    wait_until,
    worker_args,
)
from tests.remote_support import PROTOCOL, granted
from tests.runtime_support import standing_persona
from tests.signing_support import peer_verifier, protected_header
from tests.web_support import deployment_env
from virgo import kek

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]

PUBLIC_ORIGIN = "https://virgo.example.org"
STATUS = re.compile(r'^\[[^]]+\] \d+ \S+ "[A-Z]+ \S+ HTTP/[\d.]+" (\d{3}) ')
# Run as `sh -c HIDE hide PATH COMMAND...`: an empty tmpfs over PATH, then COMMAND in its place
# (exec, so that the process the test started is the one it signals).
HIDE = 'mount -t tmpfs -o mode=0700,size=64k elsewhere "$1" && shift && exec "$@"'


def hiding(path: Path) -> list[str]:
    """A command prefix: what follows runs in a mount namespace where `path` is empty."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "hide", str(path)]


def namespaces_work(probe: Path) -> bool:
    try:
        done = subprocess.run([*hiding(probe), "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass
class Machine:
    """One machine's web and worker, and its `virgo` commands, all with its environment."""

    name: str
    home: Path
    env: dict[str, str]
    wrap: list[str]
    web: WebServer
    worker: CeleryProcess
    answered: list[tuple[str, int]] = field(default_factory=list)

    def virgo(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.wrap, sys.executable, "-m", "virgo.cli", *args],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )

    def get(self, path: str, status: int = 200) -> httpx.Response:
        """GET `path` from this machine's web; it must answer `status` (never a 500)."""
        with httpx.Client(base_url=self.web.base_url, timeout=30) as client:
            response = client.get(path)
        self.answered.append((path, response.status_code))
        assert response.status_code == status, (self.name, path, response.text[:500])
        return response

    def jwks(self) -> dict[str, Any]:
        return self.get("/.well-known/jwks.json").json()

    def card(self, persona: Persona) -> dict[str, Any]:
        return self.get(persona.card_path).json()

    def statuses_logged(self) -> list[int]:
        return [
            int(match.group(1))
            for line in self.web.log.read_text(errors="replace").splitlines()
            if (match := STATUS.match(line))
        ]

    def stop(self) -> None:
        self.worker.stop()
        self.web.stop()


@pytest.fixture
def machines(
    settings: Any,
    tmp_path: Path,
    private_redis: RedisServer,
    static_root: Path,  # noqa: F811 (the fixture imported above)
) -> Iterator[tuple[Machine, Machine]]:
    homes = {name: tmp_path / name / "home" for name in ("a", "b")}
    for home in homes.values():
        home.mkdir(mode=0o700, parents=True)
    hide = namespaces_work(tmp_path / "a")
    # This process reads what is owed as the machines do: cards for the deployment's origin.
    settings.VIRGO_PUBLIC_BASE_URL = PUBLIC_ORIGIN
    shared = deployment_env(
        private_redis,
        SECRET_KEY=secrets.token_urlsafe(50),
        # A KEK of the deployment's own: this test process could not open the keys it seals.
        VIRGO_KEY_ENCRYPTION_KEY=kek.generate(),
        VIRGO_PUBLIC_BASE_URL=PUBLIC_ORIGIN,
        VIRGO_STATIC_ROOT=str(static_root),
        WEB_CONCURRENCY="1",
    )
    built = []
    for name, other in (("a", "b"), ("b", "a")):
        env = {**shared, "VIRGO_HOME": str(homes[name])}
        wrap = hiding(homes[other]) if hide else []
        built.append(
            Machine(
                name=name,
                home=homes[name],
                env=env,
                wrap=wrap,
                web=WebServer(tmp_path / name, env, wrap=wrap),
                worker=CeleryProcess(
                    worker_args(f"worker-{name}"), env, tmp_path / name / "worker.log", wrap=wrap
                ),
            )
        )
    a, b = built
    try:
        yield a, b
    finally:
        for machine in built:
            machine.stop()


def together[T](*calls: Callable[[], T]) -> list[T]:
    """Run `calls` at once (starting processes, commands), their results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [running.result() for running in [pool.submit(call) for call in calls]]


def published(persona: Persona) -> bool:
    return (
        PublishedCard.objects.filter(persona=persona).exists()
        and not owed_personas().filter(pk=persona.pk).exists()
    )


def publish_through_the_running_worker(broker: RedisServer, agent: Agent, name: str) -> Persona:
    """A persona made here, its stamp and card owed to whichever worker is running."""
    with celery_publishing_to(broker.url):
        persona = make_persona(agent, name=name, discoverable=True)
    wait_until(lambda: published(persona), what=f"the card of {persona.name} to be published")
    return persona


def kids(card: dict[str, Any]) -> list[str]:
    return [protected_header(signature)["kid"] for signature in card["signatures"]]


def served_alike_and_verified(persona: Persona, machines: tuple[Machine, ...]) -> dict[str, Any]:
    """The card as each machine serves it: the same bytes everywhere, verifying against every
    machine's JWKS."""
    bodies = {machine.get(persona.card_path).content for machine in machines}
    assert len(bodies) == 1
    card = machines[0].card(persona)
    for machine in machines:
        peer_verifier(machine.jwks())(card)
    return card


def test_two_machines_publish_serve_verify_and_rotate_with_no_shared_disk(
    machines: tuple[Machine, Machine], private_redis: RedisServer
) -> None:
    """VX-SCALE-1: a persona published through machine A's worker has a card machine B's web
    serves, verifying against both machines' JWKS; `virgo keys rotate` run on B is used by A's
    worker, running since before the rotation, for its next publication (the new kid first,
    verifying on both); no request to either web answers 500. VX-SCALE-2: `virgo check
    --deploy` passes on both machines, B holding no stamp file at all, and nothing is repaired."""
    a, b = machines
    agent = make_agent(make_owner())
    together(a.web.start, b.web.start, partial(a.worker.start, ready_when_logged=" ready."))
    for machine in machines:
        machine.get("/readyz")

    # Published by A's worker, the only one running: its stamp file is under A's home alone.
    first = publish_through_the_running_worker(private_redis, agent, "Первый")
    card = served_alike_and_verified(first, (b, a))
    [old] = SigningKey.objects.filter(state="active")
    assert kids(card) == [old.kid]
    jku = protected_header(card["signatures"][0])["jku"]
    assert jku == f"{PUBLIC_ORIGIN}/.well-known/jwks.json"

    # B's worker joins; the rotation is B's command, in B's environment.
    _, rotated = together(
        partial(b.worker.start, ready_when_logged=" ready."), partial(b.virgo, "keys", "rotate")
    )
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    [new] = SigningKey.objects.filter(state="active")
    assert new.kid != old.kid and f"rotated: {new.kid}" in rotated.stdout
    wait_until(lambda: not cards_owed_signatures().exists(), what="the cards to be re-signed")
    # Each web drops the card it held once the re-signing's commit moves the card's token in
    # Redis, a moment after the commit: seconds at most, not the minute a process may hold one.
    wait_until(
        lambda: all(kids(machine.card(first)) == [new.kid, old.kid] for machine in machines),
        what="both machines to serve the re-signed card",
        timeout=10,
    )
    for machine in machines:
        assert {key["kid"] for key in machine.jwks()["keys"]} == {new.kid, old.kid}
    assert kids(served_alike_and_verified(first, (a, b))) == [new.kid, old.kid]

    # A's worker alone publishes next (B's stops): it signs with B's new key, not the one it
    # opened before the rotation.
    b.worker.stop()
    second = publish_through_the_running_worker(private_redis, agent, "Second")
    card = served_alike_and_verified(second, (a, b))
    assert kids(card) == [new.kid, old.kid]

    # Each machine checks what it holds: A its two stamp files, B none, with no repair.
    stamps = {machine.name: sorted(machine.home.rglob(STAMP_FILE_NAME)) for machine in machines}
    assert {path.relative_to(a.home).parts[1] for path in stamps["a"]} == {
        str(first.uuid),
        str(second.uuid),
    }
    assert stamps["b"] == []
    if b.wrap:  # and B could not have read A's: A's home is empty where B runs
        seen = subprocess.run(
            [*b.wrap, "ls", "-A", str(a.home)], capture_output=True, text=True, timeout=30
        )
        assert (seen.returncode, seen.stdout) == (0, "")
    checks = together(*(partial(machine.virgo, "check", "--deploy") for machine in machines))
    for machine, checked in zip(machines, checks, strict=True):
        assert checked.returncode == 0, (machine.name, checked.stdout + checked.stderr)
        machine.get("/readyz")
    assert not AuditEvent.objects.filter(
        kind__in=[AuditEvent.Kind.STAMP_REPAIRED, AuditEvent.Kind.STAMP_QUARANTINED]
    ).exists()

    # Every answer either web gave, the probes while starting included: none was a 5xx.
    for machine in machines:
        logged = machine.statuses_logged()
        assert len(logged) >= len(machine.answered)
        assert not [status for status in logged if status >= 500], machine.web.log.read_text()


# VX-SCALE-4: not the same public base URL.
OTHER_ORIGIN = "https://virgo-b.example.org"


def test_a_machine_on_another_public_base_url_fails_its_checks_and_rewrites_nothing(
    machines: tuple[Machine, Machine], private_redis: RedisServer
) -> None:
    """VX-SCALE-4: machine B is configured with another public base URL than the installation's
    (A's, which the first card recorded). 10 GETs of a card alternating between A's web and B's
    give one ETag, and the stored card stays as A's worker published it: B signs nothing. B's
    /readyz answers 503 naming `base_url`, its `virgo check --deploy` fails with virgo.E031
    naming both URLs and the fix, and its worker does not start (one line, status 2); A, and a
    machine spelling A's URL otherwise, pass. Neither web answers a 500."""
    a, b = machines
    b.env["VIRGO_PUBLIC_BASE_URL"] = b.web.env["VIRGO_PUBLIC_BASE_URL"] = OTHER_ORIGIN
    agent = make_agent(make_owner())
    together(a.web.start, b.web.start, partial(a.worker.start, ready_when_logged=" ready."))
    persona = publish_through_the_running_worker(private_redis, agent, "Один")
    published = PublishedCard.objects.get(persona=persona)
    assert published.base_url == PUBLIC_ORIGIN

    etags = [(a, b)[number % 2].get(persona.card_path).headers["ETag"] for number in range(10)]
    assert etags == [published.etag] * 10
    after = PublishedCard.objects.get(persona=persona)
    assert (after.etag, after.last_modified, bytes(after.body)) == (
        published.etag,
        published.last_modified,
        bytes(published.body),
    )

    a.get("/readyz")
    readiness = b.get("/readyz", status=503).json()
    assert readiness["failed"] == ["base_url"]
    assert readiness["checks"]["base_url"] == "failed: BaseUrlMismatch"
    respelt = replace(a, env={**a.env, "VIRGO_PUBLIC_BASE_URL": "HTTPS://Virgo.Example.org:443/"})
    passed, also_passed, failed = together(
        partial(a.virgo, "check", "--deploy"),
        partial(respelt.virgo, "check", "--deploy"),
        partial(b.virgo, "check", "--deploy"),
    )
    for checked in (passed, also_passed):
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "virgo.E031" in failed.stderr
    assert f"this process's VIRGO_PUBLIC_BASE_URL is {OTHER_ORIGIN}" in failed.stderr
    assert f"the installation's public base URL is {PUBLIC_ORIGIN}" in failed.stderr
    assert f"`virgo cards move-base-url {OTHER_ORIGIN}`" in failed.stderr

    worker = subprocess.run(
        [*b.wrap, sys.executable, "-m", "celery", "-A", "virgo", *worker_args("worker-b")],
        cwd=REPO,
        env=b.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )
    assert worker.returncode == 2, worker.stdout + worker.stderr
    assert (
        worker.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"virgo worker: this process's VIRGO_PUBLIC_BASE_URL is {OTHER_ORIGIN}, but the "
            f"installation's public base URL is {PUBLIC_ORIGIN}; set VIRGO_PUBLIC_BASE_URL="
            f"{PUBLIC_ORIGIN} on this machine"
        )
    )
    assert PublishedCard.objects.get(persona=persona).etag == published.etag

    # Every answer either web gave: no 5xx but B's /readyz.
    for machine, expected in ((a, []), (b, [503])):
        logged = machine.statuses_logged()
        assert len(logged) >= len(machine.answered)
        assert [status for status in logged if status >= 500] == expected, (
            machine.web.log.read_text()
        )


def remote_call(
    machine: Machine, persona: Persona, token: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """A call to the persona's remote endpoint on this machine's web: the tool's result."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL,
    }
    with httpx.Client(base_url=machine.web.base_url, timeout=30) as client:
        answered = client.post(f"/mcp/{persona.uuid}", json=body, headers=headers)
    machine.answered.append((f"/mcp/{persona.uuid}", answered.status_code))
    assert answered.status_code == 200, (machine.name, answered.text[:500])
    return answered.json()["result"]["structuredContent"]


def test_a_personas_workspace_is_one_whichever_machine_answers(
    machines: tuple[Machine, Machine], tmp_path: Path, settings: Any
) -> None:
    """VX-REMOTE-2, decision 275: with one directory at `$VIRGO_HOME/workspaces` on both
    machines, what a remote call on A writes, a remote call on B reads. A machine whose
    directory is its own instead fails /readyz (`workspaces`) and `virgo check --deploy`
    (runtime.E002) while A's passes; neither web answers another 5xx."""
    a, b = machines
    shared = tmp_path / "shared-workspaces"
    shared.mkdir(mode=0o700)
    for machine in machines:
        (machine.home / "workspaces").symlink_to(shared, target_is_directory=True)
    together(a.web.start, b.web.start)
    # This process grants the token, as the installation's authorization server.
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": PUBLIC_ORIGIN}
    persona = standing_persona()
    _, tokens = granted(persona)
    token = tokens["access_token"]
    note = {"path": "memory/two-machines.md", "content": "written on A"}
    assert remote_call(a, persona, token, "workspace_write", note)["ok"]
    read = remote_call(b, persona, token, "workspace_read", {"path": note["path"]})
    assert read["ok"] and "written on A" in json.dumps(read), read
    assert list(shared.rglob("two-machines.md"))

    (b.home / "workspaces").unlink()
    (b.home / "workspaces").mkdir(mode=0o700)
    # (Both are unready for `signing` too: this process signed the card under a key of its
    # own, which the machines cannot open. Only the workspaces tell them apart.)
    readiness = b.get("/readyz", status=503).json()
    assert readiness["checks"]["workspaces"] == "failed: NotShared"
    assert a.get("/readyz", status=503).json()["checks"]["workspaces"] == "ok"
    checked = b.virgo("check", "--deploy")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "runtime.E002" in checked.stderr
    assert f"{b.home / 'workspaces'} has no marker" in checked.stderr
    for machine, expected in ((a, [503]), (b, [503])):
        logged = machine.statuses_logged()
        assert [status for status in logged if status >= 500] == expected, (
            machine.web.log.read_text()
        )
