"""Real virgo-web processes with production settings on the PostgreSQL test database and a Redis
of the test's own: their environment, manage.py run in it, and what each worker answered (read
from the server's access log)."""

import os
import re
import secrets
import subprocess
import sys

import httpx
from django.conf import settings

from tests.live import (
    DEADLINE_SECONDS,
    REPO,
    RedisServer,
    WebServer,
    current_database_url,
    wait_until,
)

ACCESS = re.compile(r'^\[[^]]+\] (\d+) \S+ "GET (\S+) HTTP/[\d.]+" (\d{3}) ')


def deployment_env(redis: RedisServer, **extra: str) -> dict[str, str]:
    """The web processes' environment: production settings on the test database and Redis."""
    local_switches = {"VIRGO_EMBEDDED", "DEBUG", "CELERY_TASK_ALWAYS_EAGER"}
    env = {key: value for key, value in os.environ.items() if key not in local_switches}
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.settings",
        SECRET_KEY=secrets.token_urlsafe(50),
        VIRGO_KEY_ENCRYPTION_KEY=",".join(settings.VIRGO_KEY_ENCRYPTION_KEYS),
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=current_database_url(),
        REDIS_URL=redis.url,
        VIRGO_HOME=str(settings.VIRGO_HOME),
        VIRGO_CARD_RATE_LIMIT="100000/m",
        SECURE_SSL_REDIRECT="0",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )


def get(server: WebServer, path: str, **headers: str) -> int:
    """One request on a connection of its own, so whichever worker accepts it answers."""
    with httpx.Client(timeout=30) as client:
        return client.get(server.base_url + path, headers=headers).status_code


def answers_by_worker(server: WebServer, path: str, since: int = 0) -> dict[str, set[int]]:
    """From the access log after line `since`: the statuses each worker process answered."""
    found: dict[str, set[int]] = {}
    for line in server.log.read_text().splitlines()[since:]:
        match = ACCESS.match(line)
        if match and match.group(2) == path:
            found.setdefault(match.group(1), set()).add(int(match.group(3)))
    return found


def log_length(server: WebServer) -> int:
    return len(server.log.read_text().splitlines())


def every_worker_answers(server: WebServer, path: str, status: int, *, workers: int) -> None:
    """Ask until `workers` processes answered `path`; each must answer `status`, nothing else."""
    since = log_length(server)

    def enough() -> bool:
        assert get(server, path) == status
        return len(answers_by_worker(server, path, since)) >= workers

    wait_until(enough, what=f"{workers} workers to answer {path} with {status}")
    assert set().union(*answers_by_worker(server, path, since).values()) == {status}
