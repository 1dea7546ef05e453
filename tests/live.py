"""Real services for the `live` tests: the PostgreSQL test database, Redis, Celery processes.

`make test` runs the suite a second time on PostgreSQL, passes a Redis in VIRGO_TEST_REDIS_URL and
sets VIRGO_REQUIRE_SERVICES=1, so that a missing service fails the run instead of quietly skipping
the tests that need it. Run by hand without them, those tests skip and say what they need.
"""

import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection
from kombu import pools

from virgo.outages import BROKER

REPO = Path(__file__).resolve().parent.parent
# Generous: these bound how long a broken run hangs, they are not performance assertions.
DEADLINE_SECONDS = 90.0


def services_required() -> bool:
    return os.environ.get("VIRGO_REQUIRE_SERVICES", "") == "1"


def unavailable(reason: str) -> NoReturn:
    if services_required():
        pytest.fail(f"{reason}; VIRGO_REQUIRE_SERVICES=1 says it must be here")
    pytest.skip(reason)


def wait_until(
    predicate: Callable[[], object], *, what: str, timeout: float = DEADLINE_SECONDS
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


# Test servers listen below the kernel's ephemeral range: a port bind(0) hands out lies inside it,
# and any outgoing connection on the machine (this suite opens thousands) may take it before the
# server it was chosen for binds, which for `make serve` is a minute of migrations later.
_LOWEST_TEST_PORT = 10000
_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_slice() -> range:
    """This xdist worker's own share of the test ports, so two workers never pick the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), 1)
    index = int(worker) % workers if worker.isdigit() else 0
    width = (_ephemeral_low() - _LOWEST_TEST_PORT) // workers
    first = _LOWEST_TEST_PORT + index * width
    return range(first, first + width)


def free_port() -> int:
    """A loopback port nothing holds now and no other test of this run was given."""
    candidates = list(_worker_slice())
    random.shuffle(candidates)
    for port in candidates:
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise AssertionError("no free loopback port below the ephemeral range")


def current_database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test_<name>), for subprocesses."""
    db = connection.settings_dict
    user = quote(db["USER"] or "", safe="")
    password = quote(db["PASSWORD"] or "", safe="")
    return f"postgres://{user}:{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


class RedisServer:
    """A private redis-server that a test may stop and start again on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.password = secrets.token_hex(16)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("needs redis-server (apt-get install redis-server)")
        config = self.directory / "redis.conf"
        config.write_text(
            "bind 127.0.0.1\n"
            f"port {self.port}\n"
            f"requirepass {self.password}\n"
            f"dir {self.directory}\n"
            f"logfile {self.directory / 'redis.log'}\n"
            'save ""\n'
            "appendonly no\n"
        )
        config.chmod(0o600)
        self.process = subprocess.Popen([binary, str(config)])
        wait_until(self.answers, what="redis-server to answer")

    def answers(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=DEADLINE_SECONDS)
            self.process = None


def worker_args(name: str, *, pool: str = "solo") -> list[str]:
    """`celery -A virgo`'s arguments for one worker named `name`, one task at a time."""
    return [
        "worker",
        f"--pool={pool}",
        "--concurrency=1",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        f"--hostname={name}@%h",
        "--loglevel=INFO",
    ]


class CeleryProcess:
    """`celery -A virgo worker|beat` as its own process, on the test database and a Redis.

    `wrap` goes before the command (e.g. `unshare --mount ...`), and must exec it, so that the
    process started is the one signalled."""

    def __init__(
        self, args: list[str], env: dict[str, str], log: Path, *, wrap: Sequence[str] = ()
    ) -> None:
        self.args = args
        self.env = env
        self.log = log
        self.wrap = list(wrap)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, ready_when_logged: str) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*self.wrap, sys.executable, "-m", "celery", "-A", "virgo", *self.args],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(
            lambda: self._logged(ready_when_logged),
            what=f"celery {self.args[0]} to log {ready_when_logged!r}; see {self.log}",
        )

    def _logged(self, text: str) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"celery {self.args[0]} exited early:\n{self.log.read_text()}")
        return text in self.log.read_text(errors="replace")

    def children(self) -> list[int]:
        """The process ids of its children (a prefork worker's pool processes)."""
        assert self.process is not None
        task = Path(f"/proc/{self.process.pid}/task")
        return [
            int(pid)
            for thread in task.iterdir()
            for pid in (thread / "children").read_text().split()
        ]

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish, acknowledge or clean up anything."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=DEADLINE_SECONDS)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()


class CeleryProcesses:
    """Starts workers and beat against one Redis and the test database; stops them all after."""

    def __init__(self, directory: Path, broker: RedisServer) -> None:
        self.directory = directory
        self.broker = broker
        self.started: list[CeleryProcess] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CELERY_")}
        env.update(
            DJANGO_SETTINGS_MODULE="virgo.settings",
            DATABASE_URL=current_database_url(),
            REDIS_URL=self.broker.url,
            SECRET_KEY="live-test-" + secrets.token_hex(16),
            # The signing keys this process made open in the worker too (VX-SCALE-1).
            VIRGO_KEY_ENCRYPTION_KEY=",".join(settings.VIRGO_KEY_ENCRYPTION_KEYS),
            VIRGO_EMBEDDED="1",
            VIRGO_HOME=str(settings.VIRGO_HOME),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    def worker(
        self, name: str = "worker", *, pool: str = "solo", **extra_env: str
    ) -> CeleryProcess:
        """`--pool=solo` runs tasks in the worker process itself; `prefork` in one child of it,
        which the worker replaces when it dies."""
        process = CeleryProcess(
            worker_args(name, pool=pool),
            self.env(**extra_env),
            self.directory / f"{name}.log",
        )
        process.start(ready_when_logged=" ready.")
        self.started.append(process)
        return process

    def beat(self, **extra_env: str) -> CeleryProcess:
        process = CeleryProcess(
            [
                "beat",
                f"--schedule={self.directory / 'beat-schedule'}",
                "--loglevel=INFO",
            ],
            self.env(**extra_env),
            self.directory / "beat.log",
        )
        process.start(ready_when_logged="beat: Starting")
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()


class WebServer:
    """`virgo-web` (virgo.web: granian serving virgo.wsgi), the deployed web processes, on a
    free port. Its access lines name the worker process that served each request. `wrap` goes
    before the command, as for CeleryProcess."""

    ACCESS_LINE = re.compile(r'^\[[^]]+\] (\d+) \S+ "([A-Z]+) (\S+) HTTP/[\d.]+" \d{3} ')

    def __init__(self, directory: Path, env: dict[str, str], *, wrap: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**env, "VIRGO_BIND": f"127.0.0.1:{self.port}"}
        self.log = directory / "web.log"
        self.wrap = list(wrap)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*self.wrap, sys.executable, "-m", "virgo.web"],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._answers, what=f"virgo-web to answer /healthz; see {self.log}")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"virgo-web exited:\n{self.log.read_text()}")
        try:
            return httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def workers_that_served(self, path: str, method: str | None = None) -> set[str]:
        served = set()
        for line in self.log.read_text().splitlines():
            match = self.ACCESS_LINE.match(line)
            if match and match.group(3) == path and method in (None, match.group(2)):
                served.add(match.group(1))
        return served

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=DEADLINE_SECONDS)


@contextmanager
def celery_publishing_to(broker_url: str) -> Iterator[None]:
    """Make this process queue tasks on a real broker instead of running them eagerly."""
    from virgo.celery import app

    saved = {"broker_url": app.conf.broker_url, "task_always_eager": app.conf.task_always_eager}

    def drop_connections() -> None:
        # Celery caches its connection and producer pools, kombu keeps them in global groups;
        # what this process learnt about the last broker's outages is no longer true either.
        pools.reset()
        app._pool = None
        app.amqp._producer_pool = None
        BROKER.forget()

    drop_connections()
    app.conf.update(broker_url=broker_url, task_always_eager=False)
    try:
        yield
    finally:
        drop_connections()
        app.conf.update(saved)


# Transactional tests -----------------------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every transactional test starts from the migrated database, seeded rows included.

    A transactional test ends by flushing every table, the rows data migrations seed (the
    verb->skill map) with them, so the next one would start without them; and a test restoring
    them after a plain flush (which re-creates content types) would fail on duplicates. Serialized
    rollback for all of them restores the seeded state before each, whatever ran before.
    """
    for item in items:
        marker = item.get_closest_marker("django_db")
        options = dict(marker.kwargs) if marker is not None else {}
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            options.get("transaction")
            or options.get("reset_sequences")
            or {"transactional_db", "live_server"} & fixtures
        ):
            options.update(transaction=True, serialized_rollback=True)
            item.add_marker(pytest.mark.django_db(**options), append=False)


# Fixtures ----------------------------------------------------------------------------------------


@pytest.fixture
def live_postgres() -> None:
    """The test runs on PostgreSQL (make test's second run); skip or fail otherwise."""
    if connection.vendor != "postgresql":
        unavailable("needs PostgreSQL: set DATABASE_URL (make test does)")


@pytest.fixture(scope="session")
def test_redis_url() -> str:
    """A Redis shared by the whole run, from VIRGO_TEST_REDIS_URL (make test provides one)."""
    url = os.environ.get("VIRGO_TEST_REDIS_URL", "")
    if not url:
        unavailable("needs Redis: set VIRGO_TEST_REDIS_URL (make test does)")
    return url


@pytest.fixture(scope="session")
def test_redis_cache_url(test_redis_url: str) -> str:
    """The same Redis as the cache reaches it in `make serve`: over its Unix socket (make test
    provides VIRGO_TEST_REDIS_CACHE_URL, a `unix://` URL)."""
    url = os.environ.get("VIRGO_TEST_REDIS_CACHE_URL", "")
    if not url.startswith("unix://"):
        unavailable("needs Redis on a Unix socket: set VIRGO_TEST_REDIS_CACHE_URL (make test does)")
    return url


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of this test's own, which the test may stop and restart."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def celery_processes(
    tmp_path_factory: pytest.TempPathFactory, private_redis: RedisServer
) -> Iterator[CeleryProcesses]:
    processes = CeleryProcesses(tmp_path_factory.mktemp("celery"), private_redis)
    yield processes
    processes.stop_all()
