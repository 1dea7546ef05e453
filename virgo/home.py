"""VIRGO_HOME and what Virgo keeps in it are the owner's alone (VX-SEC-9).

VIRGO_HOME holds the embedded database, the stamp files, the workspaces and the launcher's
configs. Created by Virgo, it is 0700 whatever the umask. The embedded default (no DATABASE_URL)
also makes an existing VIRGO_HOME and its SQLite database owner-only, so an installation made
before this rule is closed on its next start: the database file is created empty at 0600 before
SQLite first opens it (SQLite gives its journal files the database file's mode). Elsewhere an
existing VIRGO_HOME is left as its operator set it up (it may be shared with the machines whose
runtimes read the stamps).

Imported by virgo.settings: nothing here may read Django's settings.
"""

import contextlib
import os
import shutil
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

DIR_MODE = 0o700
FILE_MODE = 0o600
# SQLite's companions of a database file: the rollback journal, the write-ahead log and its index.
SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")


def private_directory(path: Path) -> None:
    """Create `path` as 0700 (its missing parents with the umask's mode, as any mkdir -p)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)
        # mkdir's mode is filtered by the umask; chmod's is not.
        os.chmod(path, DIR_MODE)


def make_owner_only(path: Path, mode: int) -> None:
    """Take group and other access away from an existing `path` of this user's."""
    with contextlib.suppress(FileNotFoundError, PermissionError):
        status = path.stat()
        if status.st_uid == os.geteuid() and status.st_mode & 0o077:
            os.chmod(path, mode)


def private_file(path: Path) -> None:
    """Create `path` empty at 0600 unless it exists; an existing one of this user's is made so."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        make_owner_only(path, FILE_MODE)
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def private_embedded_home(home: Path, database: Path) -> None:
    """The embedded default's VIRGO_HOME at 0700 and its SQLite database at 0600, new or old."""
    try:
        private_directory(home)
        make_owner_only(home, DIR_MODE)
        private_file(database)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"VIRGO_HOME: {home} cannot hold the embedded database ({exc.strerror}: "
            f"{exc.filename}); point VIRGO_HOME at a directory this user may create and write"
        ) from None
    for suffix in SQLITE_COMPANIONS:
        make_owner_only(database.with_name(database.name + suffix), FILE_MODE)


def count_metrics_in(directory: Path) -> None:
    """This process and the ones it starts count their metrics (virgo.metrics) into `directory`,
    made empty and owner-only first: what an earlier run of the same group left is gone.

    Called by a process group's first process (virgo-web, a Celery worker) before
    prometheus-client is imported, which reads the variable once, when it is imported.
    """
    if "prometheus_client" in sys.modules:
        raise RuntimeError("count_metrics_in() must run before prometheus_client is imported")
    shutil.rmtree(directory, ignore_errors=True)
    private_directory(directory.parent)
    make_owner_only(directory.parent, DIR_MODE)
    private_directory(directory)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
