"""VX-SCALE-3: `make serve` stops every process it started, PostgreSQL and Redis included, however
it is stopped: SIGTERM to its whole process group (as a service manager or `kill -- -PGID` does),
SIGTERM to the script alone, Ctrl-C (SIGINT to the group, as a terminal sends it) and SIGHUP (the
terminal closed). Each way runs against a private VIRGO_HOME on free ports, and afterwards no
postgres, redis-server, virgo-web or celery process of that home is left.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import REPO, free_port, wait_until

pytestmark = pytest.mark.live

START_SECONDS = 300.0
STOP_SECONDS = 120.0


def processes_of(home: Path) -> list[str]:
    """Every live process whose command line or working directory names `home` (postgres runs
    with `-D HOME/services/postgres/data`, redis-server from HOME/services/redis, virgo-web and
    celery with VIRGO_HOME=HOME in their environment)."""
    found = []
    needle = str(home).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in cmdline or needle in environ or cwd.startswith(str(home)):
            found.append(f"{entry.name}: {cmdline.replace(b'\0', b' ').decode(errors='replace')}")
    return found


@pytest.fixture(scope="module")
def serve_base() -> Iterator[Path]:
    if shutil.which("redis-server") is None or not (
        shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    ):
        pytest.skip("needs PostgreSQL and Redis servers (make test installs them)")
    base = Path(tempfile.mkdtemp(prefix="virgo-serve-stop-"))
    base.chmod(0o711)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def start(home: Path, log: Path, *, through_make: bool) -> subprocess.Popen[bytes]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent),
        "VIRGO_HOME": str(home),
        # Its own copy: tests run side by side must not collect into one release directory.
        "VIRGO_STATIC_ROOT": str(home / "staticfiles"),
        "VIRGO_PYTHON": sys.executable,
        "PORT": str(free_port()),
        "WEB_CONCURRENCY": "1",
        "VIRGO_WORKER_CONCURRENCY": "1",
        "PYTHONUNBUFFERED": "1",
        # This checkout's code, even where the venv's editable install points at another one.
        "PYTHONPATH": str(REPO),
    }
    if through_make:
        # The Makefile's own venv may not exist in a worktree: the recipe's body is what is run.
        command = ["make", "--no-print-directory", "-s", "serve", f"PY={sys.executable}"]
        command += ["-o", ".venv/.installed", "-o", "install"]
    else:
        command = [str(REPO / "scripts" / "serve")]
    # As a terminal starts it: a test run started in the background (`make test &`, CI under
    # nohup) ignores SIGINT, which its children inherit and a shell cannot then trap.
    command = ["env", "--default-signal=INT,QUIT", *command]
    with log.open("wb") as output:
        return subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # As a terminal starts it: a suite run under nohup would hand down SIGHUP ignored,
            # which a shell cannot trap, and the hangup this test sends would never arrive.
            preexec_fn=_hangup_as_a_terminal_has_it,
        )


def _hangup_as_a_terminal_has_it() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


WAYS = {
    # way: (through make, whom the signal goes to, which signal)
    "make, SIGTERM to the group": (True, "group", signal.SIGTERM),
    "make, Ctrl-C (SIGINT to the group)": (True, "group", signal.SIGINT),
    "make, SIGHUP to the group": (True, "group", signal.SIGHUP),
    "script, SIGTERM to the group": (False, "group", signal.SIGTERM),
    "script, SIGTERM to the script": (False, "leader", signal.SIGTERM),
    "script, SIGHUP to the script": (False, "leader", signal.SIGHUP),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_make_serve_leaves_nothing_running_however_it_is_stopped(
    way: str, serve_base: Path, tmp_path: Path
) -> None:
    """VX-SCALE-3: started, answering, then stopped one way, three times over (the first start of
    each way initialises PostgreSQL; the later ones find it and start faster): nothing of it
    remains, PostgreSQL and Redis included."""
    through_make, target, signum = WAYS[way]
    home = serve_base / way.replace(" ", "-").replace(",", "").replace("(", "").replace(")", "")
    home.mkdir(mode=0o700)
    for attempt in range(3):
        log = tmp_path / f"serve-{attempt}.log"
        process = start(home, log, through_make=through_make)
        try:

            def up(log: Path = log, process: subprocess.Popen[bytes] = process) -> bool:
                return "Virgo is serving" in log.read_text(errors="replace") or (
                    process.poll() is not None
                )

            wait_until(up, what=f"make serve to serve; see {log}", timeout=START_SECONDS)
            assert process.poll() is None, log.read_text(errors="replace")
            assert any("postgres" in line for line in processes_of(home))
        finally:
            if process.poll() is None:
                if target == "group":
                    os.killpg(process.pid, signum)
                else:
                    process.send_signal(signum)
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                pytest.fail(f"make serve still running after {way}; its log:\n{log.read_text()}")
        # make may exit at once on the signal, leaving the script to finish the stop.
        try:
            wait_until(
                lambda: not processes_of(home), what="every process to stop", timeout=STOP_SECONDS
            )
        except AssertionError:
            left = processes_of(home)
            for line in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
            raise AssertionError(
                f"{way}, attempt {attempt + 1}: left running {left}\n{log.read_text()}"
            ) from None
        assert "Stopped." in log.read_text(errors="replace"), log.read_text()
        time.sleep(0.5)
