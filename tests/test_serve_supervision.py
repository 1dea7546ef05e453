"""VX-REL-4: under `make serve` (scripts/serve with a private VIRGO_HOME, its own PostgreSQL and
Redis) a Celery worker and a web process SIGKILLed are started again while the rest serves;
SIGTERM stops everything; a second start keeps the database's URL and the demo owner's password.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.live import REPO, free_port, wait_until

pytestmark = pytest.mark.live

# Generous: the first start creates a PostgreSQL cluster and migrates it.
START_SECONDS = 300.0
STOP_SECONDS = 120.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@dataclass
class Serve:
    home: Path
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def pids(self, name: str) -> list[int]:
        return [
            int(pid) for pid in re.findall(rf"serve: {name} started \(pid (\d+)\)", self.said())
        ]

    def started(self, name: str, times: int) -> int:
        wait_until(
            lambda: len(self.pids(name)) >= times,
            what=f"{name} to start {times} times; see {self.log}",
            timeout=START_SECONDS,
        )
        return self.pids(name)[times - 1]

    def answers(self, path: str = "/healthz") -> bool:
        try:
            return httpx.get(self.base + path, timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=STOP_SECONDS)


@pytest.fixture(scope="module")
def serve_home() -> Iterator[Path]:
    """A VIRGO_HOME as `make run` leaves it (0700), in a checkout-like directory others may pass
    through: as root, `make serve` must open the home to the `postgres` user's traversal."""
    base = Path(tempfile.mkdtemp(prefix="virgo-serve-"))
    base.chmod(0o711)
    home = base / "home"
    home.mkdir(mode=0o700)
    yield home
    shutil.rmtree(base, ignore_errors=True)


def start_serve(home: Path, port: int, log: Path) -> Serve:
    if shutil.which("redis-server") is None or not (
        shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    ):
        pytest.skip("needs PostgreSQL and Redis servers (make test installs them)")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent),
        "VIRGO_HOME": str(home),
        # Its own copy: tests run side by side must not collect into one release directory.
        "VIRGO_STATIC_ROOT": str(home.parent / "staticfiles"),
        "VIRGO_PYTHON": sys.executable,
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "VIRGO_WORKER_CONCURRENCY": "1",
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(REPO / "scripts" / "serve")],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    serve = Serve(home, port, process, log)

    def serving() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"scripts/serve exited {process.returncode}:\n{serve.said()}")
        return "Virgo is serving" in serve.said()

    try:
        wait_until(serving, what=f"make serve to serve; see {log}", timeout=START_SECONDS)
    except BaseException:
        serve.stop()
        raise
    return serve


def test_a_killed_worker_and_web_process_are_started_again_while_the_rest_serves(
    serve_home: Path, tmp_path: Path
) -> None:
    """VX-REL-4: SIGKILL the Celery worker: web keeps answering and beat keeps running while it
    is started again; SIGKILL the web process (granian's main): worker and beat keep their
    processes and the new web process serves on the same port. SIGTERM stops it all. A second
    start finds PostgreSQL at the same URL, and the demo password printed at the first still
    signs in."""
    port = free_port()
    serve = start_serve(serve_home, port, tmp_path / "first.log")
    try:
        password = re.search(r"Demo owner: demo / (\S+) \(printed only now\)", serve.said())
        assert password, serve.said()
        database_url = (serve_home / "services/postgres/env").read_text()
        worker, beat, web = (serve.started(name, 1) for name in ("worker", "beat", "web"))
        assert serve.answers("/readyz")
        wait_until(
            lambda: " ready." in serve.said(), what="the worker to be ready", timeout=START_SECONDS
        )

        os.kill(worker, signal.SIGKILL)
        # While the worker is away (it starts again after 1 s), the web processes answer.
        for _ in range(10):
            assert serve.answers(), serve.said()
        worker_again = serve.started("worker", 2)
        assert f"serve: worker (pid {worker}) was killed by SIGKILL" in serve.said()
        wait_until(
            lambda: serve.said().count(" ready.") >= 2,
            what="the new worker to be ready",
            timeout=START_SECONDS,
        )
        assert alive(beat) and alive(web) and alive(worker_again)

        os.kill(web, signal.SIGKILL)
        web_again = serve.started("web", 2)
        assert f"serve: web (pid {web}) was killed by SIGKILL" in serve.said()
        wait_until(serve.answers, what="the new web process to answer", timeout=START_SECONDS)
        assert alive(worker_again) and alive(beat) and alive(web_again)
        assert serve.pids("worker") == [worker, worker_again]
        assert serve.pids("beat") == [beat]
        assert serve.answers("/readyz")
    finally:
        status = serve.stop()
    assert status == 143, serve.said()
    assert serve.said().rstrip().endswith("Stopped.")
    assert not any(alive(pid) for pid in (worker_again, beat, web_again))
    assert not serve.answers()

    again = start_serve(serve_home, port, tmp_path / "second.log")
    try:
        assert (serve_home / "services/postgres/env").read_text() == database_url
        assert "Demo owner: demo (password unchanged" in again.said()
        assert "printed only now" not in again.said()
        token = httpx.post(
            f"{again.base}/api/auth/token/",
            json={"username": "demo", "password": password.group(1)},
            timeout=10,
        )
        assert token.status_code == 200, token.text
    finally:
        assert again.stop() == 143, again.said()
