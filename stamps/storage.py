"""Owner-private stamp files: `<VIRGO_HOME>/personas/<uuid>/generations/<n>/CAPABILITY-STAMP.json`.

A file is written once, atomically, and never replaced: the bytes go to a private temporary file
that is fsynced and then hard-linked into place. A link, unlike a rename, fails when the target
exists, so two racing writers (a Celery retry and its original) can never swap one file for
another; the loser finds the file and compares bytes instead.
"""

import os
from pathlib import Path

from django.conf import settings

STAMP_FILE_NAME = "CAPABILITY-STAMP.json"
FILE_MODE = 0o600
DIR_MODE = 0o700


class StampFileConflict(Exception):
    """A different file already holds this generation's stamp; it is never rewritten."""


def stamp_path(persona_uuid: object, generation: int) -> Path:
    return (
        Path(settings.VIRGO_HOME)
        / "personas"
        / str(persona_uuid)
        / "generations"
        / str(generation)
        / STAMP_FILE_NAME
    )


def _private_dirs(path: Path) -> None:
    """Create the missing directories of `path` as 0700 (not subject to the umask)."""
    home = Path(settings.VIRGO_HOME)
    home.mkdir(parents=True, exist_ok=True)
    current = home
    for part in path.relative_to(home).parts:
        current = current / part
        try:
            current.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(current, DIR_MODE)
        _fsync_dir(current.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_stamp_file(path: Path, data: bytes) -> Path:
    """Write `data` to `path` once. Identical bytes already there are fine; different ones raise."""
    if path.exists():
        return _same_or_conflict(path, data)
    _private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return _same_or_conflict(path, data)
    finally:
        temporary.unlink()
    _fsync_dir(path.parent)
    return path


def _same_or_conflict(path: Path, data: bytes) -> Path:
    if path.read_bytes() != data:
        raise StampFileConflict(
            f"{path} already holds a different stamp; a stamp file is never rewritten"
        )
    return path
