"""The embedded default keeps its files owner-only whatever the umask (VX-SEC-9): VIRGO_HOME, the
SQLite database and its journals, the stamps, and the archives `virgo persona export` writes.

Each test runs Virgo as its own processes, as `make run` does, under a umask that would otherwise
let the group or everyone read (and, with 002, write) what they create."""

import os
import secrets
import sqlite3
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stamps.storage import stamp_path, write_stamp_file
from tests.live import REPO
from virgo.home import private_file

DEADLINE_SECONDS = 180


def run_as_make_run(home: Path, umask: int) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`manage.py ...` on the embedded default in `home`, started under `umask`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "REDIS_CACHE_URL")
        and not key.startswith("CELERY_")
    }
    env.update(VIRGO_EMBEDDED="1", VIRGO_HOME=str(home), SECRET_KEY=secrets.token_hex(16))

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
            preexec_fn=lambda: os.umask(umask),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    return manage


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def shared_entries(home: Path) -> list[str]:
    """Everything under `home` the group or others may reach."""
    return [
        f"{path.relative_to(home)} {mode(path):o}"
        for path in [home, *home.rglob("*")]
        if mode(path) & 0o077
    ]


def test_make_run_setup_leaves_nothing_readable_but_by_the_owner(tmp_path: Path) -> None:
    """VX-SEC-9: after migrate and load_demo in a fresh VIRGO_HOME under umask 002, the home is
    0700, the database 0600, and no file or directory in it is open to the group or others; an
    export archive, wherever it is written, is 0600."""
    home = tmp_path / "fresh" / "virgo-home"
    manage = run_as_make_run(home, 0o002)
    manage("migrate", "--noinput", "-v", "0")
    manage("load_demo")
    assert mode(home) == 0o700
    assert mode(home / "virgo.sqlite3") == 0o600
    assert (home / "virgo.sqlite3").stat().st_size > 0
    assert list(home.glob("personas/*/generations/*/CAPABILITY-STAMP.json"))
    assert shared_entries(home) == []

    persona = manage(
        "shell", "-c", "from personas.models import Persona; print(Persona.objects.first().uuid)"
    ).stdout.splitlines()[-1]
    archive = tmp_path / "exports" / "reviewer.tar.gz"
    archive.parent.mkdir()
    manage("persona", "export", persona, str(archive))
    assert mode(archive) == 0o600


def test_an_existing_home_and_database_are_made_owner_only(tmp_path: Path) -> None:
    """VX-SEC-9: an installation made before the rule (a 0755 home, a 0644 database and journal)
    is closed by the next start of the embedded default."""
    home = tmp_path / "virgo-home"
    manage = run_as_make_run(home, 0o022)
    manage("migrate", "--noinput", "-v", "0")
    database = home / "virgo.sqlite3"
    journal = home / "virgo.sqlite3-journal"
    journal.write_bytes(b"")
    for path, loose in ((home, 0o755), (database, 0o644), (journal, 0o664)):
        path.chmod(loose)
    manage("check")
    assert (mode(home), mode(database), mode(journal)) == (0o700, 0o600, 0o600)


def test_sqlite_gives_its_journals_the_database_files_mode(tmp_path: Path) -> None:
    """VX-SEC-9: the rollback journal and the write-ahead log (and its index) SQLite creates
    beside a 0600 database are 0600 too, under umask 002: nothing else need watch for them."""
    database = tmp_path / "virgo.sqlite3"
    private_file(database)
    previous = os.umask(0o002)
    try:
        connection = sqlite3.connect(database, isolation_level=None)
        connection.execute("CREATE TABLE t (x)")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO t VALUES (1)")
        assert mode(tmp_path / "virgo.sqlite3-journal") == 0o600
        connection.execute("COMMIT")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("INSERT INTO t VALUES (2)")
        assert mode(tmp_path / "virgo.sqlite3-wal") == 0o600
        assert mode(tmp_path / "virgo.sqlite3-shm") == 0o600
        connection.close()
    finally:
        os.umask(previous)


def test_a_home_the_stamp_writer_creates_is_owner_only(settings: Any) -> None:
    """VX-SEC-9: with DATABASE_URL set nothing creates VIRGO_HOME before the first stamp file;
    the home that write creates is 0700 under umask 022, like the directories below it."""
    home = Path(settings.VIRGO_HOME)
    assert not home.exists()
    previous = os.umask(0o022)
    try:
        write_stamp_file(stamp_path(uuid.uuid4(), 1), b"{}")
    finally:
        os.umask(previous)
    assert shared_entries(home) == []
