"""VX-OPS-2: a missing or bad setting is one line naming the variable, what is wrong and the fix,
and exit status 2, from every entry point: `virgo <command>`, `manage.py`, `virgo-web`, the
Celery worker and beat, and `make serve` (scripts/serve, its body). Each runs as a real process
in an environment of its own (PATH, HOME, a fresh VIRGO_HOME and the mistake), from a directory
that is not the checkout."""

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.fresh_checkout import REPO
from tests.live import RedisServer, free_port

BIN = Path(sys.executable).parent
TIMEOUT = 120

ENTRY_POINTS = {
    "virgo check": [str(BIN / "virgo"), "check"],
    "virgo mcp serve": [str(BIN / "virgo"), "mcp", "serve", "--persona", str(uuid.uuid4())],
    "manage.py migrate": [sys.executable, str(REPO / "manage.py"), "migrate", "--noinput"],
    "virgo-web": [str(BIN / "virgo-web")],
    "celery worker": [str(BIN / "celery"), "-A", "virgo", "worker", "--pool=solo"],
    "celery beat": [str(BIN / "celery"), "-A", "virgo", "beat"],
}
PROGRAM = {
    "virgo check": "virgo",
    "virgo mcp serve": "virgo",
    "manage.py migrate": "manage.py",
    "virgo-web": "virgo-web",
    "celery worker": "celery",
    "celery beat": "celery",
}
# A mistake: the variables set, the one the line must name, and words of its fix.
MISTAKES = {
    "SECRET_KEY missing": ({}, "SECRET_KEY", "set it in the environment or in"),
    "a rate that is not one": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_CARD_RATE_LIMIT": "lots"},
        "VIRGO_CARD_RATE_LIMIT",
        "is not a rate such as 60/m",
    ),
    "a settings file others may read": (
        {"VIRGO_ENV_FILE": "{world_readable}"},
        "VIRGO_ENV_FILE",
        "chmod 600",
    ),
}
# More mistakes, through one entry point.
MORE_MISTAKES = {
    "a number that is not one": (
        {"VIRGO_EMBEDDED": "1", "DB_CONN_MAX_AGE": "forever"},
        "DB_CONN_MAX_AGE",
        "is not a whole number",
    ),
    "a yes-or-no that is neither": (
        {"VIRGO_EMBEDDED": "yes please"},
        "VIRGO_EMBEDDED",
        "is not 1 or 0",
    ),
    "a database URL of another kind": (
        {"VIRGO_EMBEDDED": "1", "DATABASE_URL": "mysql://virgo@db.example/virgo"},
        "DATABASE_URL",
        "does not start with one of postgres://",
    ),
    "a database URL that does not parse": (
        {"VIRGO_EMBEDDED": "1", "DATABASE_URL": "postgres://virgo:p/w@db.example:x/virgo"},
        "DATABASE_URL",
        "percent-encode",
    ),
    # VX-SCALE-4: the URL every machine must render cards under.
    "a public base URL without a scheme": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_PUBLIC_BASE_URL": "virgo.example.org"},
        "VIRGO_PUBLIC_BASE_URL",
        "is not a public base URL (it does not start with https:// or http://)",
    ),
    "a Redis URL without a scheme": (
        {"VIRGO_EMBEDDED": "1", "REDIS_URL": "127.0.0.1:6379"},
        "REDIS_URL",
        "does not start with one of redis://",
    ),
    "a proxy that is no address": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_TRUSTED_PROXIES": "the-load-balancer"},
        "VIRGO_TRUSTED_PROXIES",
        "comma-separated",
    ),
    "a home that cannot be made": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_HOME": "{a_file}/home"},
        "VIRGO_HOME",
        "point VIRGO_HOME at a directory",
    ),
    "a missing settings file": (
        {"VIRGO_ENV_FILE": "{a_file}.gone"},
        "VIRGO_ENV_FILE",
        "does not exist",
    ),
    "a hub without its secret": (
        {
            "VIRGO_CHANNEL_URL": "https://hub.example",
            "SECRET_KEY": "k" * 50,
            "VIRGO_KEY_ENCRYPTION_KEY": "A" * 43 + "=",
        },
        "VIRGO_CHANNEL_SECRET",
        "set VIRGO_CHANNEL_SECRET",
    ),
    # VX-SCALE-1: the key-encryption key the signing keys are sealed under.
    "no key-encryption key in production": (
        {"SECRET_KEY": "k" * 50},
        "VIRGO_KEY_ENCRYPTION_KEY",
        "`python -m virgo.kek`",
    ),
    "a key-encryption key that is not one": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_KEY_ENCRYPTION_KEY": "not-a-key"},
        "VIRGO_KEY_ENCRYPTION_KEY",
        "key 1 of 1 is not 32 bytes",
    ),
    "a key-encryption key file others may read": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_KEY_ENCRYPTION_KEY_FILE": "{world_readable}"},
        "VIRGO_KEY_ENCRYPTION_KEY_FILE",
        "chmod 600",
    ),
    # VX-ID-2: where organization proofs are asked and whom their HTTPS is trusted by.
    "a DNS server named by name": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_DNS_NAMESERVERS": "dns.example:53"},
        "VIRGO_DNS_NAMESERVERS",
        "write servers such as 127.0.0.1:5353",
    ),
    "a CA bundle that is not there": (
        {"VIRGO_EMBEDDED": "1", "VIRGO_OUTBOUND_CA_BUNDLE": "{a_file}.gone"},
        "VIRGO_OUTBOUND_CA_BUNDLE",
        "name a PEM file",
    ),
}


def run(
    command: list[str], variables: dict[str, str], tmp_path: Path, *, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    world_readable = tmp_path / "world-readable.env"
    world_readable.write_text("VIRGO_EMBEDDED=1\n")
    world_readable.chmod(0o644)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VIRGO_HOME": str(tmp_path / "h")}
    env.update(
        (name, value.format(world_readable=world_readable, a_file=a_file))
        for name, value in variables.items()
    )
    process = subprocess.Popen(
        command,
        env=env,
        cwd=cwd or elsewhere,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        # All it started goes too (what make serve supervises ends with its supervisor).
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def assert_one_line(
    done: subprocess.CompletedProcess[str], program: str, variable: str, fix: str
) -> None:
    said = f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 2, said
    assert "Traceback" not in done.stderr + done.stdout, said
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"{program}: {variable}: "), said
    assert fix in line, said


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_every_entry_point_says_what_is_wrong_in_one_line(
    entry_point: str, mistake: str, tmp_path: Path
) -> None:
    """VX-OPS-2: one line `program: VARIABLE: what is wrong; the fix`, status 2, no traceback."""
    variables, variable, fix = MISTAKES[mistake]
    done = run(ENTRY_POINTS[entry_point], variables, tmp_path)
    assert_one_line(done, PROGRAM[entry_point], variable, fix)


@pytest.mark.parametrize("mistake", MORE_MISTAKES)
def test_each_kind_of_bad_setting_is_named(mistake: str, tmp_path: Path) -> None:
    """VX-OPS-2: numbers, yes-or-no values, URLs, networks, the home and the settings file."""
    variables, variable, fix = MORE_MISTAKES[mistake]
    done = run(ENTRY_POINTS["virgo check"], variables, tmp_path)
    assert_one_line(done, "virgo", variable, fix)


@pytest.mark.parametrize(
    ("variables", "line_start"),
    [
        ({"WEB_THREADS": "four"}, "virgo-web: WEB_THREADS: 'four' is not a whole number"),
        ({"VIRGO_BIND": "8000"}, "virgo-web: VIRGO_BIND: '8000' is not host:port"),
    ],
)
def test_virgo_web_names_its_own_settings_too(
    variables: dict[str, str], line_start: str, tmp_path: Path
) -> None:
    """VX-OPS-2: the web server's own variables, refused before any setting is read."""
    done = run(ENTRY_POINTS["virgo-web"], {"VIRGO_EMBEDDED": "1", **variables}, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(line_start)
    assert "unset it for" in line


@pytest.mark.live
@pytest.mark.parametrize(
    ("variables", "line"),
    [
        # Read by every process: migrate, the first, stops make serve.
        (
            {"VIRGO_CARD_RATE_LIMIT": "lots"},
            "manage.py: VIRGO_CARD_RATE_LIMIT: 'lots' is not a rate",
        ),
        # Read by virgo-web alone: the supervisor stops everything it started.
        ({"WEB_THREADS": "four"}, "virgo-web: WEB_THREADS: 'four' is not a whole number"),
    ],
)
def test_make_serve_stops_with_status_2_on_a_bad_setting(
    variables: dict[str, str], line: str, tmp_path: Path, private_redis: RedisServer
) -> None:
    """VX-OPS-2: `make serve` (scripts/serve, run from the checkout as make runs it) ends with
    status 2 and the process's one line, and stops what it started. Its database and broker are
    given (an SQLite file, a private Redis), so that it starts no services of its own."""
    done = run(
        [str(REPO / "scripts" / "serve")],
        {
            "VIRGO_PYTHON": sys.executable,
            "VIRGO_HOME": str(tmp_path / "home"),
            # Its own copy: tests run side by side must not collect into one release directory.
            "VIRGO_STATIC_ROOT": str(tmp_path / "staticfiles"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'serve.sqlite3'}",
            "REDIS_URL": private_redis.url,
            "PORT": str(free_port()),
            "VIRGO_WORKER_CONCURRENCY": "1",
            **variables,
        },
        tmp_path,
        cwd=REPO,
    )
    said = f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 2, said
    assert "Traceback" not in done.stderr + done.stdout, said
    assert [text for text in done.stderr.splitlines() if text.startswith(line)], said
    assert done.stdout.rstrip().endswith("Stopped."), said
