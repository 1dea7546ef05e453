"""Faults made for real, for the `live` fault tests: a frozen Redis, a PostgreSQL that restarts,
and request load against a running virgo-web that records every answer and how long it took."""

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings

from tests.live import DEADLINE_SECONDS, REPO, RedisServer, unavailable


@contextmanager
def frozen(redis_server: RedisServer) -> Iterator[None]:
    """SIGSTOP: the server keeps its sockets open and the kernel still accepts connections, but
    nothing is ever answered, as with a hung host. Thawed however the block ends."""
    assert redis_server.process is not None
    redis_server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        redis_server.process.send_signal(signal.SIGCONT)


def web_env(*, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """virgo-web's environment in production shape (no local mode) on these services."""
    local_switches = {"VIRGO_EMBEDDED", "DEBUG", "CELERY_TASK_ALWAYS_EAGER"}
    env = {key: value for key, value in os.environ.items() if key not in local_switches}
    env |= {
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "VIRGO_KEY_ENCRYPTION_KEY": ",".join(settings.VIRGO_KEY_ENCRYPTION_KEYS),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "VIRGO_HOME": str(settings.VIRGO_HOME),
        "SECURE_SSL_REDIRECT": "0",
        "WEB_CONCURRENCY": "2",
        "WEB_THREADS": "4",
        "PYTHONUNBUFFERED": "1",
    }
    env |= extra
    return env


@dataclass(frozen=True)
class Answer:
    name: str
    status: int  # 0: no answer (the connection failed or timed out)
    started: float
    seconds: float
    retry_after: str | None
    content_type: str
    body: bytes


class Load:
    """Request loops on threads against one server, until stopped (bounded in time anyway)."""

    def __init__(self, base_url: str, *, timeout: float = 15.0) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def request(self, name: str, method: str, path: str, **kwargs: object) -> Answer:
        started = time.monotonic()
        try:
            with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
                response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
            answer = Answer(
                name,
                response.status_code,
                started,
                time.monotonic() - started,
                response.headers.get("Retry-After"),
                response.headers.get("Content-Type", ""),
                response.content,
            )
        except httpx.TransportError:
            answer = Answer(name, 0, started, time.monotonic() - started, None, "", b"")
        with self._lock:
            self.answers.append(answer)
        return answer

    def loop(
        self, name: str, method: str, path: str, *, pause: float = 0.02, **kwargs: object
    ) -> None:
        def run() -> None:
            deadline = time.monotonic() + DEADLINE_SECONDS
            while not self._stop.is_set() and time.monotonic() < deadline:
                self.request(name, method, path, **kwargs)
                self._stop.wait(pause)

        thread = threading.Thread(target=run, name=f"load-{name}")
        thread.start()
        self._threads.append(thread)

    def stop(self) -> list[Answer]:
        self._stop.set()
        for thread in self._threads:
            thread.join(DEADLINE_SECONDS)
        return list(self.answers)

    def between(self, start: float, end: float) -> list[Answer]:
        return [answer for answer in self.answers if start <= answer.started < end]


class PostgresCluster:
    """A private PostgreSQL of the test's own (scripts/lib.sh), which it may restart in place:
    `pg_ctl restart` keeps the port, as a real database restart does."""

    def __init__(self) -> None:
        # The postgres user must reach the cluster's directory (lib.sh makes it 0711).
        self.directory = Path(tempfile.mkdtemp(prefix="virgo-faults-postgres."))
        self.directory.chmod(0o711)

    def _lib(self, script: str) -> str:
        done = subprocess.run(
            ["bash", "-c", f'set -e; . "{REPO}/scripts/lib.sh"; {script}'],
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def start(self) -> None:
        if shutil.which("initdb") is None and not list(Path("/usr/lib/postgresql").glob("*/bin")):
            unavailable("needs the PostgreSQL server (apt-get install postgresql)")
        self._lib(f'postgres_start "{self.directory}" fast')

    @property
    def url(self) -> str:
        env = (self.directory / "env").read_text()
        return env.strip().removeprefix("DATABASE_URL=")

    def restart(self, down_for: float = 0.0) -> None:
        """A fast restart: every connection is closed, the server is down for a moment, or
        for `down_for` seconds (so that a load on a busy machine is sure to meet it)."""
        ctl = f'as_postgres "$(postgres_bindir)/pg_ctl" -D "{self.directory}/data" -w -t 60'
        if not down_for:
            self._lib(f"{ctl} -m fast restart >/dev/null")
            return
        self._lib(f"{ctl} -m fast stop >/dev/null")
        time.sleep(down_for)
        port = (self.directory / "port").read_text().strip()
        self._lib(f'{ctl} -l "{self.directory}/data/server.log" -o "-p {port}" start >/dev/null')

    def stop(self) -> None:
        try:
            self._lib(f'postgres_stop "{self.directory}"')
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
