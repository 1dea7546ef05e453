"""VX-REL-4: under `make serve` (scripts/serve with a private VIRGO_HOME, its own PostgreSQL and
Redis) a Celery worker and a web process SIGKILLed are started again while the rest serves;
SIGTERM stops everything; a second start keeps the database's URL and the demo owner's password.
"""

import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live import free_port, wait_until
from tests.serve_support import START_SECONDS, alive, start_serve

pytestmark = pytest.mark.live


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
