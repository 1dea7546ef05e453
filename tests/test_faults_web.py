"""Faults under the real web server: virgo-web (granian, 2 workers x 4 threads) on PostgreSQL and a
Redis of the test's own, while Redis is frozen or restarted and PostgreSQL restarts.

The issue these prove fixed (VX-REL-1, VX-REL-2, VX-REL-3): eight /readyz probes held all eight
threads for the whole of a Redis freeze, so /healthz and the API timed out too; a Redis restart
cost one 500 per web thread (a stale connection in the card fast path); a 0.4 s PostgreSQL
restart answered 18 API reads with 500, and the first /readyz after an idle restart was 503.
"""

import json
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.fault_support import Answer, Load, PostgresCluster, frozen, web_env
from tests.live import REPO, RedisServer, WebServer, current_database_url

pytestmark = pytest.mark.live

THREADS = 8  # WEB_CONCURRENCY x WEB_THREADS
READYZ_BOUND = 2.0
# Nine requests on eight threads, and the two processes need not get four probes each: a request
# may wait for a probe's thread, up to the bound, before its own turn. Without the bound, a
# probe and everything behind it would wait for the whole freeze.
WITHIN_BOUND = 2 * READYZ_BOUND + 1.0


def statuses(answers: list[Answer]) -> Counter[tuple[str, int]]:
    return Counter((answer.name, answer.status) for answer in answers)


def assert_no_failures(answers: list[Answer]) -> None:
    """No 500 and no request left unanswered (the load's own timeout is 15 s)."""
    failed = [answer for answer in answers if answer.status >= 500 and answer.status != 503]
    unanswered = [answer for answer in answers if answer.status == 0]
    assert not failed and not unanswered, statuses(answers)


def assert_503s_say_why(answers: list[Answer]) -> None:
    for answer in answers:
        if answer.status == 503:
            assert answer.retry_after is not None and int(answer.retry_after) > 0, answer
            if answer.name != "readyz":
                assert answer.content_type == "application/json", answer
                assert json.loads(answer.body)["code"] in {
                    "database_unavailable",
                    "signin_unavailable",
                }, answer


def warnings_in(log: Path, text: str) -> int:
    return log.read_text(errors="replace").count(text)


def together(load: Load, requests: list[tuple[str, str, str, dict[str, Any]]]) -> list[Answer]:
    """Send every request at the same moment, each on its own connection."""
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        futures = [
            pool.submit(load.request, name, method, path, **kwargs)
            for name, method, path, kwargs in requests
        ]
        return [future.result() for future in futures]


# Redis, with the test database -------------------------------------------------------------


@pytest.fixture
def redis_web(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    private_redis: RedisServer,
    live_postgres: None,
    transactional_db: None,
) -> Iterator[WebServer]:
    """virgo-web on the test database and the test's Redis; the test's parameter adds to its
    environment (how long a process that found Redis down goes without it, timeouts)."""
    server = WebServer(
        tmp_path,
        web_env(
            database_url=current_database_url(),
            redis_url=private_redis.url,
            VIRGO_CARD_RATE_LIMIT="100000/m",
            VIRGO_MUTATION_RATE_LIMIT="100000/m",
            # The wrong-password requests test Redis's absence, not the lockout: a busy machine
            # needs more warm-up rounds, each adding to the owner's failures.
            VIRGO_SIGNIN_FAILURES_PER_USERNAME="100000",
            VIRGO_SIGNIN_FAILURES_PER_ADDRESS="100000",
            **request.param,
        ),
    )
    yield server
    server.stop()


@pytest.fixture
def owner_and_persona() -> tuple[str, Persona]:
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    token = Token.objects.create(user=persona.agent.owner)
    return token.key, persona


def write(token: str, persona: Persona, description: str) -> tuple[str, str, dict[str, Any]]:
    return (
        "PATCH",
        f"/api/personas/{persona.uuid}/",
        {"json": {"description": description}, "headers": {"Authorization": f"Token {token}"}},
    )


def owner_requests(token: str, persona: Persona) -> dict[str, tuple[str, str, dict[str, Any]]]:
    auth = {"headers": {"Authorization": f"Token {token}"}}
    return {
        "card": ("GET", persona.card_path, {}),
        "list": ("GET", "/api/personas/", auth),
        "write": write(token, persona, "written " + secrets.token_hex(4)),
        # A wrong password: 422 while the sign-in counts can be reached, 503 while they cannot.
        "token": (
            "POST",
            "/api/auth/token/",
            {"json": {"username": persona.agent.owner.username, "password": "not it"}},
        ),
    }


OK = {"card": 200, "list": 200, "write": 200, "token": 422}


# A Redis timeout well above what a request takes on a busy machine, so that "nothing waits
# for it" (a request well under it) is told apart from one that waited, whatever the load. And a
# retry interval longer than the whole freeze: each process's first calls wait out the timeout
# (20 s of it on a quiet machine, twice that under load), and once a process's interval has
# passed, one request of its own tries Redis again and waits as long, as it should.
FROZEN = {"VIRGO_DEGRADED_RETRY_SECONDS": "600", "REDIS_TIMEOUT": "5"}
SPREAD_ROUNDS = 10


@pytest.mark.parametrize("redis_web", [FROZEN], indirect=True)
def test_a_frozen_redis_holds_no_thread_and_answers_no_500(
    redis_web: WebServer, private_redis: RedisServer, owner_and_persona: tuple[str, Persona]
) -> None:
    """VX-REL-1, VX-REL-3: with Redis frozen, eight /readyz probes (one per web thread) answer
    503 within their bound, and /healthz is answered meanwhile; a card, the owner's writes
    and a token request are answered too: writes kept (200), the card served, the token
    refused with 503; and once each process has found Redis frozen, nothing waits for it."""
    token, persona = owner_and_persona
    write_path = write(token, persona, "")[1]
    redis_web.start()
    load = Load(redis_web.base_url)
    requests = owner_requests(token, persona)
    # No write before the freeze: every write the log shows was served while Redis was frozen.
    warm = together(load, [(name, *requests[name]) for name in ("card", "list", "token")])
    assert [answer.status for answer in warm] == [200, 200, 422]

    with frozen(private_redis), ThreadPoolExecutor(max_workers=THREADS + 1) as pool:
        frozen_at = time.monotonic()
        probes = [pool.submit(load.request, "readyz", "GET", "/readyz") for _ in range(THREADS)]
        time.sleep(0.3)
        healthz = pool.submit(load.request, "healthz", "GET", "/healthz").result()
        ready = [probe.result() for probe in probes]
        beside = together(
            load,
            [
                ("card", *requests["card"]),
                ("write", *write(token, persona, "kept 1")),
                ("write", *write(token, persona, "kept 2")),
                ("token", *requests["token"]),
            ],
        )
        # Each process meets the frozen Redis now, as the limiter's cache and as the broker of
        # the writes' tasks: writes until both have served one (the server hands a burst to
        # whichever process accepts it, so one burst may all go to one of them). Each write
        # changes the persona: one that changes nothing owes no task and never meets the broker.
        spread: list[Answer] = []
        for round_ in range(SPREAD_ROUNDS):
            burst = [
                ("write", *write(token, persona, f"spread {round_}.{n}"))
                for n in range(2 * THREADS)
            ]
            spread += together(load, burst)
            if len(redis_web.workers_that_served(write_path)) == 2:
                break
        assert len(redis_web.workers_that_served(write_path)) == 2
        after = together(
            load,
            [
                ("card", *requests["card"]),
                ("list", *requests["list"]),
                ("write", *write(token, persona, "kept 3")),
            ],
        )
        frozen_for = time.monotonic() - frozen_at

    everything = [*ready, healthz, *beside, *spread, *after]
    assert_no_failures(everything)
    assert_503s_say_why(everything)
    assert {answer.status for answer in ready} == {503}
    for answer in ready:
        assert {"cache", "broker"} <= set(json.loads(answer.body)["failed"])
    assert max(answer.seconds for answer in ready) < WITHIN_BOUND
    assert healthz.status == 200
    assert healthz.seconds < WITHIN_BOUND
    assert statuses(beside) == Counter({("card", 200): 1, ("write", 200): 2, ("token", 503): 1})
    assert {answer.status for answer in spread} == {200}
    assert statuses(after) == Counter({("card", 200): 1, ("list", 200): 1, ("write", 200): 1})
    assert frozen_for < float(FROZEN["VIRGO_DEGRADED_RETRY_SECONDS"])
    took = [(answer.name, round(answer.seconds, 2)) for answer in after]
    assert max(answer.seconds for answer in after) < float(FROZEN["REDIS_TIMEOUT"]), took
    persona.refresh_from_db()
    assert persona.description == "kept 3"


@pytest.mark.parametrize("redis_web", [{"VIRGO_DEGRADED_RETRY_SECONDS": "1"}], indirect=True)
def test_after_redis_restarts_no_request_fails_on_a_stale_connection(
    redis_web: WebServer, private_redis: RedisServer, owner_and_persona: tuple[str, Persona]
) -> None:
    """VX-REL-2: every web thread holds Redis connections (card count, cache, broker); Redis
    restarts; the next requests on every thread are answered as before, on fresh connections,
    without one going without Redis. Then a restart under load answers no 500 either."""
    token, persona = owner_and_persona
    redis_web.start()
    load = Load(redis_web.base_url)
    requests = owner_requests(token, persona)
    names = ("card", "list", "write", "token")
    round_ = [(name, *requests[name]) for name in names] * 4
    for _ in range(5):
        warm = together(load, round_)
        assert all(answer.status == OK[answer.name] for answer in warm), statuses(warm)
        if len(redis_web.workers_that_served(persona.card_path)) == 2:
            break
    assert len(redis_web.workers_that_served(persona.card_path)) == 2

    private_redis.stop()
    private_redis.start()
    idle_restart = together(load, round_) + together(load, round_)
    assert statuses(idle_restart) == Counter({(name, OK[name]): 8 for name in names})
    assert warnings_in(redis_web.log, "unreachable") == 0

    for name in names:
        load.loop(name, *requests[name][:2], **requests[name][2])
    time.sleep(1.0)
    private_redis.stop()
    time.sleep(1.0)
    private_redis.start()
    back = time.monotonic()
    time.sleep(3.0)
    answers = load.stop()

    assert_no_failures(answers)
    assert_503s_say_why(answers)
    assert {"card", "list", "write"} <= {a.name for a in answers if a.status == 200}
    # Every process tries Redis again within VIRGO_DEGRADED_RETRY_SECONDS (1 s here).
    settled = load.between(back + 1.5, time.monotonic())
    assert settled, statuses(answers)
    assert all(answer.status == OK[answer.name] for answer in settled), statuses(settled)


# PostgreSQL, a cluster of the test's own ----------------------------------------------------

SEED = """
import json
from rest_framework.authtoken.models import Token
from tests.factories import make_agent, make_owner, make_persona
persona = make_persona(make_agent(make_owner()), discoverable=True)
token = Token.objects.create(user=persona.agent.owner)
print(json.dumps({"token": token.key, "uuid": str(persona.uuid), "path": persona.card_path}))
"""


@pytest.fixture
def postgres() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def manage(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_postgresql_restart_answers_503_meanwhile_and_nothing_fails_afterwards(
    tmp_path: Path, postgres: PostgresCluster, private_redis: RedisServer
) -> None:
    """VX-REL-2, VX-REL-3: after an idle restart the first /readyz, and the first request on
    every thread, are answered on fresh connections; a restart under load answers 503 with
    Retry-After in the JSON error shape while the database is away, never 500, and every
    request after it is answered."""
    home = tmp_path / "home"
    seed_env = {
        **{key: value for key, value in os.environ.items() if key != "REDIS_URL"},
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "VIRGO_EMBEDDED": "1",
        "DATABASE_URL": postgres.url,
        "VIRGO_HOME": str(home),
    }
    manage("migrate", "--noinput", "-v", "0", env=seed_env)
    seeded = json.loads(manage("shell", "-c", SEED, env=seed_env).strip().splitlines()[-1])
    server = WebServer(
        tmp_path,
        web_env(
            database_url=postgres.url,
            redis_url=private_redis.url,
            VIRGO_HOME=str(home),
            VIRGO_MUTATION_RATE_LIMIT="100000/m",
            VIRGO_DIRECTORY_RATE_LIMIT="100000/m",
        ),
    )
    server.start()
    try:
        load = Load(server.base_url)
        auth = {"headers": {"Authorization": f"Token {seeded['token']}"}}
        reads = [
            ("list", "GET", "/api/personas/", auth),
            ("directory", "GET", "/api/directory/", auth),
            ("persona", "GET", f"/api/personas/{seeded['uuid']}/", auth),
        ] * 4
        assert {answer.status for answer in together(load, reads)} == {200}

        postgres.restart()
        first = load.request("readyz", "GET", "/readyz")
        assert first.status == 200, first.body
        idle_restart = together(load, reads) + together(load, reads)
        assert {answer.status for answer in idle_restart} == {200}, statuses(idle_restart)

        for name, method, path, kwargs in reads[:6]:
            load.loop(name, method, path, pause=0.0, **kwargs)
        load.loop("card", "GET", seeded["path"])
        load.loop("readyz", "GET", "/readyz", pause=0.2)
        load.loop(
            "write",
            "PATCH",
            f"/api/personas/{seeded['uuid']}/",
            json={"description": "written under load"},
            **auth,
        )
        time.sleep(1.0)
        restart_started = time.monotonic()
        # Down for a second: at a load of 7 a restart of a moment met no request at all.
        postgres.restart(down_for=1.0)
        back = time.monotonic()
        time.sleep(3.0)
        answers = load.stop()
    finally:
        server.stop()

    assert_no_failures(answers)
    assert_503s_say_why(answers)
    before = [answer for answer in answers if answer.started + answer.seconds < restart_started]
    assert before and {answer.status for answer in before} == {200}
    # The restart was seen: some requests were answered 503 while the database was away.
    assert any(answer.status == 503 for answer in answers), statuses(answers)
    settled = load.between(back + 0.5, time.monotonic())
    assert settled and {answer.status for answer in settled} == {200}, statuses(settled)
    assert "Internal Server Error" not in server.log.read_text(errors="replace")
