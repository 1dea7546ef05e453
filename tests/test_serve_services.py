"""VX-SCALE-4: under `make serve` (scripts/serve with a private VIRGO_HOME, its own PostgreSQL and
Redis) a PostgreSQL or Redis SIGKILLed is started again on its data, port and password, and the
Celery worker, beat and web processes survive its restart: the same processes go on working.
"""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import redis

from tests.live import REPO, wait_until
from tests.serve_support import (
    Serve,
    alive,
    serve_home,  # noqa: F401 (a fixture)
    serving,
)

pytestmark = pytest.mark.live

# Generous: bounds on a broken run, not on how fast a restart is.
BACK_SECONDS = 120.0


def send_task(serve: Serve, name: str) -> str:
    """`celery call NAME` beside the deployment, as an operator would (its serve.env): the id."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(serve.home.parent),
        "VIRGO_ENV_FILE": str(serve.home / "run" / "serve.env"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "virgo", "call", name],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def executed(serve: Serve, name: str, task_id: str) -> None:
    wait_until(
        lambda: f"Task {name}[{task_id}] succeeded" in serve.said(),
        what=f"the worker to run {name}[{task_id}]; see {serve.log}",
        timeout=BACK_SECONDS,
    )


def redis_answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def test_a_killed_redis_is_started_again_and_the_same_worker_takes_the_next_task(
    serve_home: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-SCALE-4: SIGKILL redis-server: the supervisor starts it again, answering at the URL it
    had (same port, same password); the worker, beat and web keep their processes, and a task
    sent afterwards is run by that same worker. SIGTERM then stops the new redis-server too."""
    serve = serving(serve_home, tmp_path / "serve.log")
    try:
        worker, beat, web = (serve.started(name, 1) for name in ("worker", "beat", "web"))
        redis_server = serve.started("redis", 1)
        env = (serve_home / "services/redis/env").read_text()
        url = env.split("REDIS_URL=", 1)[1].split()[0]

        os.kill(redis_server, signal.SIGKILL)
        redis_again = serve.started("redis", 2)
        assert f"serve: redis (pid {redis_server}) was killed by SIGKILL" in serve.said()
        wait_until(lambda: redis_answers(url), what="Redis at its URL", timeout=BACK_SECONDS)
        assert (serve_home / "services/redis/env").read_text() == env

        task_id = send_task(serve, "settling.tasks.retire_due_keys")
        executed(serve, "settling.tasks.retire_due_keys", task_id)
        wait_until(
            lambda: serve.answers("/readyz"), what="/readyz to answer 200", timeout=BACK_SECONDS
        )
        assert serve.pids("worker") == [worker] and alive(worker)
        assert serve.pids("beat") == [beat] and alive(beat)
        assert serve.pids("web") == [web] and alive(web)
        assert serve.pids("postgres")[1:] == []
    finally:
        status = serve.stop()
    assert status == 143, serve.said()
    assert serve.said().rstrip().endswith("Stopped.")
    assert not any(alive(pid) for pid in (redis_again, worker, beat, web))


def test_a_killed_postgres_is_started_again_and_the_web_is_ready_again(
    serve_home: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-SCALE-4: SIGKILL the postmaster (it leaves postmaster.pid and its shared memory): the
    supervisor starts it again on the same data directory and port; /readyz answers 200 again
    from the same web process, the data survived (the demo owner signs in with the password
    printed at the start), and the same worker runs a task that reads the database. SIGTERM then
    stops the new postmaster too."""
    serve = serving(serve_home, tmp_path / "serve.log")
    try:
        password = re.search(r"Demo owner: demo / (\S+) \(printed only now\)", serve.said())
        assert password, serve.said()
        worker, web = serve.started("worker", 1), serve.started("web", 1)
        postgres = serve.started("postgres", 1)
        env = (serve_home / "services/postgres/env").read_text()
        assert serve.answers("/readyz")

        os.kill(postgres, signal.SIGKILL)
        # What it left: the new one starts a second later at the earliest, over this file.
        pid_file = serve_home / "services/postgres/data/postmaster.pid"
        assert pid_file.read_text().split()[0] == str(postgres)
        postgres_again = serve.started("postgres", 2)
        assert f"serve: postgres (pid {postgres}) was killed by SIGKILL" in serve.said()
        wait_until(
            lambda: serve.answers("/readyz"), what="/readyz to answer 200", timeout=BACK_SECONDS
        )
        assert (serve_home / "services/postgres/env").read_text() == env
        token = httpx.post(
            f"{serve.base}/api/auth/token/",
            json={"username": "demo", "password": password.group(1)},
            timeout=10,
        )
        assert token.status_code == 200, token.text

        task_id = send_task(serve, "settling.tasks.retire_due_keys")
        executed(serve, "settling.tasks.retire_due_keys", task_id)
        assert serve.pids("worker") == [worker] and alive(worker)
        assert serve.pids("web") == [web] and alive(web)
        assert serve.pids("redis")[1:] == []
    finally:
        status = serve.stop()
    assert status == 143, serve.said()
    assert serve.said().rstrip().endswith("Stopped.")
    assert not alive(postgres_again)
