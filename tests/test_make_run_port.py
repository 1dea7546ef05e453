"""VX-OPS-7: `make run` on a port another process holds stops first, in one line naming the port
and the fix, with status 2, before it writes its settings file or sets anything up.

`make run` runs in a fresh checkout (tests/fresh_checkout.py), so its `var/` is that checkout's
and this working tree's is never touched, from a clean environment, while a socket of this test
listens on the port it is given.
"""

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh_checkout import REPO, clean_environment, make_fresh_checkout
from virgo.envfile import write_env_file
from virgo.ports import port_problem

# It runs `make` in a fresh checkout, as tests/test_printed_commands.py does: processes of their
# own, which a mutant of this process's code never reaches.
pytestmark = pytest.mark.live

TIMEOUT = 120
# GNU make's own line for a recipe that failed, after the recipe's.
MAKE_TRAILER = re.compile(r"^make: \*\*\* \[Makefile:\d+: run\] Error 2$")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port a server of this test listens on, as another `make run` would."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def busy_line(port: int) -> str:
    return (
        f"make run: port {port} on 127.0.0.1 is in use by another process: stop what listens "
        f"there, or run on a free port: PORT="
    )


def test_make_run_on_a_busy_port_stops_before_it_writes_anything(
    busy_port: int, tmp_path: Path
) -> None:
    """VX-OPS-7: `make run PORT=<busy>` ends with status 2 and, on stderr, the check's one line
    (the port, and a free port to run on) and make's own; var/virgo.env, already there from an
    earlier run on another port, is left as it was, and nothing was migrated or served."""
    checkout = make_fresh_checkout(tmp_path / "checkout")
    settings_file = write_env_file(
        checkout / "var" / "virgo.env",
        {"VIRGO_EMBEDDED": "1", "VIRGO_PUBLIC_BASE_URL": "http://127.0.0.1:7000"},
    )
    before = (settings_file.read_bytes(), settings_file.stat().st_mtime_ns)
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["make", "--no-print-directory", "run", f"PORT={busy_port}"],
        cwd=checkout,
        env=clean_environment(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    said = f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 2, said
    check_line, make_line = done.stderr.splitlines()
    assert check_line.startswith(busy_line(busy_port)), said
    suggested = int(re.fullmatch(r".*PORT=(\d+) make run", check_line).group(1))
    assert suggested > busy_port
    assert MAKE_TRAILER.match(make_line), said
    assert "Traceback" not in done.stdout + done.stderr
    assert (settings_file.read_bytes(), settings_file.stat().st_mtime_ns) == before
    assert sorted(os.listdir(checkout / "var")) == ["virgo.env"]


def test_the_check_is_one_line_whatever_port_it_is_given(busy_port: int) -> None:
    """VX-OPS-7: the recipe's first command, as make runs it: a busy port and a PORT that is not
    a port are each one line and status 2; a free port passes silently."""

    def check(port: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "virgo.ports", "127.0.0.1", port, "--for", "make run"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    busy = check(str(busy_port))
    assert busy.returncode == 2
    assert busy.stderr.startswith(busy_line(busy_port)) and busy.stderr.count("\n") == 1
    assert busy.stdout == ""
    for wrong in ("eighty", "0", "70000"):
        refused = check(wrong)
        assert (refused.returncode, refused.stderr) == (
            2,
            f"make run: PORT={wrong!r} is not a TCP port (1 to 65535); run on one, e.g. "
            "PORT=8000 make run\n",
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert port_problem("127.0.0.1", free) is None
    passed = check(str(free))
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")


def test_make_serve_on_a_busy_port_stops_before_it_starts_anything(
    busy_port: int, tmp_path: Path
) -> None:
    """VX-OPS-7: `make serve` on a port another process holds is the same one line (naming
    `make serve`) and status 2, before a database or Redis is started or VIRGO_HOME is made."""
    checkout = make_fresh_checkout(tmp_path / "checkout")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["make", "--no-print-directory", "serve", f"PORT={busy_port}"],
        cwd=checkout,
        env=clean_environment(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    said = f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 2, said
    check_line = done.stderr.splitlines()[0]
    assert check_line.startswith(
        f"make serve: port {busy_port} on 127.0.0.1 is in use by another process"
    ), said
    assert "Traceback" not in done.stdout + done.stderr
    assert not (checkout / "var").exists()
