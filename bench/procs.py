"""Every process the bench starts, and the promise to stop each of them again.

Processes start in a session of their own, so stopping one stops its children (gunicorn's and
Celery's workers, nginx's) and nothing else: each is signalled by its own process group id.
"""

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Processes:
    """A stack of started processes and clean-up steps, all undone by `stop_all` (LIFO)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._started: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._cleanups: list[Callable[[], None]] = []

    def start(
        self, name: str, command: Sequence[str], *, env: dict[str, str], cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (kept open for the child)
        process = subprocess.Popen(
            list(command),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._started.append((name, process))
        return process

    def on_stop(self, cleanup: Callable[[], None]) -> None:
        self._cleanups.append(cleanup)

    def stop(self, process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # A group leader that exited may leave children behind; the group id still names them.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        self._started = [(n, p) for n, p in self._started if p is not process]

    def stop_all(self) -> None:
        for _, process in reversed(list(self._started)):
            self.stop(process)
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                cleanup()
            except Exception as exc:
                print(f"bench: clean-up step failed: {exc}")


def wait_http(
    url: str, *, process: subprocess.Popen[bytes] | None = None, timeout: float = 60
) -> None:
    """Until `url` answers at all (any status), or fail naming the URL."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (names in lower case: servers differ in case) and body."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, _lower(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers.items()), error.read()


def _lower(items: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in items}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


def run_checked(command: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), check=True, text=True, **kwargs)
