"""/healthz (alive) and /readyz (database, cache and broker reachable) for load balancers."""

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from tests.live import REPO, RedisServer, celery_publishing_to, free_port
from virgo import health
from virgo.checks import check_static_files_collected


def redis_cache(url: str) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 1, "SOCKET_TIMEOUT": 1},
        }
    }


def test_healthz_answers_without_a_database_or_a_login(client: Client) -> None:
    """No django_db mark: the test fails if /healthz so much as opens a database connection."""
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"status": "ok"}
    assert "no-store" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_is_ready_on_the_embedded_default(client: Client) -> None:
    """The backlog as the probe after the first shows it: the first starts the count."""
    health.BACKLOG.forget()
    assert client.get("/readyz").status_code == 200
    deadline = time.monotonic() + 10
    while health.BACKLOG.read() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert json.loads(response.content) == {
        "status": "ready",
        "checks": {
            "database": "ok",
            "cache": "ok",
            "broker": "ok",
            "signing": "ok",
            "base_url": "ok",
            "workspaces": "ok",
            "static": "ok",
        },
        "failed": [],
        "backlog": {"stamp": 0, "card": 0, "recompute": 0, "signature": 0},
    }
    assert "no-store" in response["Cache-Control"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_health_endpoints_only_answer_reads(client: Client, path: str, method: str) -> None:
    response = getattr(client, method)(path)
    assert response.status_code == 405


@pytest.mark.live
@pytest.mark.django_db
@pytest.mark.usefixtures("live_postgres")
def test_readyz_is_ready_against_postgresql_and_redis(
    client: Client, settings: Settings, test_redis_url: str
) -> None:
    settings.CACHES = redis_cache(test_redis_url)
    with celery_publishing_to(test_redis_url):
        response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["checks"] == {
        "database": "ok",
        "cache": "ok",
        "broker": "ok",
        "signing": "ok",
        "base_url": "ok",
        "workspaces": "ok",
        "static": "ok",
    }


@pytest.mark.live
@pytest.mark.django_db
def test_readyz_names_the_cache_and_the_broker_when_redis_is_down(
    client: Client, settings: Settings, private_redis: RedisServer
) -> None:
    settings.CACHES = redis_cache(private_redis.url)
    private_redis.stop()
    with celery_publishing_to(private_redis.url):
        response = client.get("/readyz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["status"] == "unavailable"
    assert body["failed"] == ["cache", "broker"]
    assert body["checks"]["database"] == "ok"
    assert private_redis.password not in response.content.decode()


PROBE = """
import json
import django
django.setup()
from django.test import Client
client = Client()
answers = {}
for path in ("/healthz", "/readyz"):
    response = client.get(path)
    answers[path] = [response.status_code, json.loads(response.content)]
print(json.dumps(answers))
"""


@pytest.mark.live
def test_an_unreachable_database_fails_readyz_but_not_healthz() -> None:
    """A real process configured with a database nobody listens on."""
    env = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.settings",
        VIRGO_EMBEDDED="1",
        DATABASE_URL=f"postgres://virgo:secret-password@127.0.0.1:{free_port()}/virgo",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert answers["/healthz"] == [200, {"status": "ok"}]
    status, body = answers["/readyz"]
    assert status == 503
    assert body["failed"] == ["database"]
    assert body["checks"]["database"] == "failed: OperationalError"
    assert "secret-password" not in done.stdout


BACKLOG_RELEASED = threading.Event()
backlog_counts: list[float] = []


def blocked_backlog() -> dict[str, int]:
    """A backlog count that lasts until the test says: the stand-in for a scan of 100k."""
    backlog_counts.append(time.monotonic())
    BACKLOG_RELEASED.wait(timeout=30)
    return {"stamp": 7, "card": 7, "recompute": 0}


def probe(client: Client) -> dict[str, Any]:
    """One /readyz, failed (not hung) if it waits on something that does not end."""
    answers: list[dict[str, Any]] = []
    thread = threading.Thread(target=lambda: answers.append(client.get("/readyz").json()))
    thread.start()
    thread.join(timeout=10)
    assert answers, "/readyz waited on the backlog count"
    return answers[0]


@pytest.mark.django_db(transaction=True)
def test_readyz_never_waits_on_a_long_backlog_count(client: Client, settings: Settings) -> None:
    """VX-OPS-5: the backlog is a count over every persona, seconds long with 100k; a probe
    waits for it only briefly and reports the last finished count, and probes while one count
    runs start no other, so time to ready does not grow with the personas."""
    settings.VIRGO_BACKLOG = "tests.test_health.blocked_backlog"
    settings.VIRGO_READYZ_BACKLOG_FRESH_SECONDS = 0
    BACKLOG_RELEASED.clear()
    backlog_counts.clear()
    health.BACKLOG.forget()
    try:
        answers = [probe(client) for _ in range(3)]
        assert [answer["status"] for answer in answers] == ["ready"] * 3
        assert [answer["backlog"] for answer in answers] == [None] * 3
        assert len(backlog_counts) == 1
    finally:
        BACKLOG_RELEASED.set()
    deadline = time.monotonic() + 10
    while health.BACKLOG.read() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe(client)["backlog"] == {"stamp": 7, "card": 7, "recompute": 0}
    health.BACKLOG.forget()


@pytest.mark.django_db(transaction=True)
def test_readyz_reuses_a_fresh_backlog_count(client: Client, settings: Settings) -> None:
    """VX-OPS-5: a count younger than VIRGO_READYZ_BACKLOG_FRESH_SECONDS answers the next
    probes, so frequent probes never add up to a scan each."""
    settings.VIRGO_BACKLOG = "tests.test_health.blocked_backlog"
    settings.VIRGO_READYZ_BACKLOG_FRESH_SECONDS = 60
    settings.VIRGO_READYZ_BACKLOG_WAIT_SECONDS = 10
    BACKLOG_RELEASED.set()
    backlog_counts.clear()
    health.BACKLOG.forget()
    assert [probe(client)["backlog"]["stamp"] for _ in range(3)] == [7, 7, 7]
    assert len(backlog_counts) == 1
    health.BACKLOG.forget()


@pytest.mark.django_db(transaction=True)
def test_settling_waits_for_the_count_a_probe_left_running(
    client: Client, settings: Settings
) -> None:
    """VX-OPS-5: a test's teardown waits for the count a probe left running before it empties
    the database (tests/stamp_fixtures.py): the count's read would otherwise lock SQLite's
    shared tables under the flush, and the flush's failure leaks this test's rows into the
    next test."""
    settings.VIRGO_BACKLOG = "tests.test_health.blocked_backlog"
    settings.VIRGO_READYZ_BACKLOG_FRESH_SECONDS = 60
    BACKLOG_RELEASED.clear()
    health.BACKLOG.forget()
    assert probe(client)["backlog"] is None
    health.BACKLOG.settle(timeout=0.2)
    assert health.BACKLOG.read() is None, "settle returned a count that was still blocked"
    threading.Timer(0.2, BACKLOG_RELEASED.set).start()
    health.BACKLOG.settle(timeout=10)
    assert health.BACKLOG.read() == {"stamp": 7, "card": 7, "recompute": 0}
    health.BACKLOG.forget()


MANIFEST_STORAGE = "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"


def manifest_storage(settings: Settings, root: Any) -> None:
    """Production's kind of static storage (hashed names from a manifest) over `root`."""
    settings.STATIC_ROOT = root
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": MANIFEST_STORAGE}}


@pytest.mark.django_db
def test_readyz_fails_on_a_process_whose_static_files_were_not_collected(
    client: Client, settings: Settings, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-SCALE-2: a manifest storage over a STATIC_ROOT without staticfiles.json would answer
    every admin page with a 500; /readyz says `static` failed (and logs "static files not
    collected" with the path) until the files are collected, then it is ready."""
    manifest_storage(settings, tmp_path)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["failed"] == ["static"]
    assert body["checks"]["static"] == "failed: StaticFilesNotCollected"
    assert "static files not collected" in caplog.text
    assert str(tmp_path / "staticfiles.json") in caplog.text
    (tmp_path / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    assert client.get("/readyz").status_code == 200


def test_check_deploy_names_static_files_not_collected(settings: Settings, tmp_path: Any) -> None:
    """VX-SCALE-2: `check --deploy` fails with virgo.E021 naming the missing manifest; it passes
    once collected, and the embedded default (files served from the apps) never needs it."""
    manifest_storage(settings, tmp_path)
    [error] = check_static_files_collected()
    assert error.id == "virgo.E021" and error.is_serious()
    assert error.msg == f"static files not collected: {tmp_path / 'staticfiles.json'} is missing"
    (tmp_path / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    assert check_static_files_collected() == []
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    settings.STATIC_ROOT = tmp_path / "nothing-here"
    assert check_static_files_collected() == []
