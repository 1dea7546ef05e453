"""`make serve` for its tests (scripts/serve with a private VIRGO_HOME, its own PostgreSQL and
Redis): started on a port of the test's own, watched through what it logs, and stopped."""

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


@pytest.fixture
def serve_home() -> Iterator[Path]:
    """A new VIRGO_HOME as `make run` leaves it (0700), in a directory the `postgres` user may
    pass through (pytest's own are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="virgo-serve-services-"))
    base.chmod(0o711)
    home = base / "home"
    home.mkdir(mode=0o700)
    yield home
    shutil.rmtree(base, ignore_errors=True)


def serving(home: Path, log: Path) -> Serve:
    """scripts/serve on `home`, once its worker is ready to take tasks."""
    serve = start_serve(home, free_port(), log)
    try:
        wait_until(
            lambda: " ready." in serve.said(), what="the worker to be ready", timeout=START_SECONDS
        )
    except BaseException:
        serve.stop()
        raise
    return serve
