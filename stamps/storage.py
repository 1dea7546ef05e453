"""Owner-private stamp files: `<VIRGO_HOME>/personas/<uuid>/generations/<n>/CAPABILITY-STAMP.json`.

A file is written once, atomically, and never replaced: the bytes go to a private temporary file
that is fsynced and then hard-linked into place. A link, unlike a rename, fails when the target
exists, so two racing writers (a Celery retry and its original) can never swap one file for
another; the loser finds the file and compares bytes instead.

A writer killed mid-write leaves its temporary file; whoever writes that generation's stamp
next (the retry, the reconciler) removes such files once they are too old to be a live write's.

A batch (the fan-out's, the reconciler's) writes every temporary file, flushes the filesystem
once and links them all: one flush per batch instead of three to five fsyncs per file. The
flush makes every file's bytes durable before any name points at them, so a crash can lose a
link but never leave one to bytes that are not the stamp's. The links need no flush of their
own: the stored row is the stamp, and a file lost with its link is a missing file, which is
written again from the row wherever it is needed (VX-SCALE-2), never a wrong one.
"""

import contextlib
import ctypes
import os
import time
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from virgo.home import private_directory

STAMP_FILE_NAME = "CAPABILITY-STAMP.json"
FILE_MODE = 0o600
DIR_MODE = 0o700
_LIBC = ctypes.CDLL(None, use_errno=True)
# No live write takes minutes: a temporary file this old was left by a writer that was killed.
ABANDONED_AFTER_SECONDS = 600


class StampFileConflict(Exception):
    """A different file already holds this generation's stamp; it is never rewritten."""


def stamp_path(persona_uuid: object, generation: int) -> Path:
    # One path parsed rather than six joined: `virgo check` asks this of every stamp.
    return Path(
        f"{settings.VIRGO_HOME}/personas/{persona_uuid}/generations/{generation}/{STAMP_FILE_NAME}"
    )


def _umask_keeps_owner_bits() -> bool:
    """Whether the process's umask leaves 0700 and 0600 as they are (it takes no owner bit), so
    a mode given to mkdir or open needs no chmod after. Read, not set: setting it to read it
    would race another thread's file creation. False where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return not int(line.split()[1], 8) & 0o700
    except (OSError, ValueError):
        pass
    return False


def _private_dirs(directory: Path, *, sync: bool = True, chmod: bool = True) -> bool:
    """Create `directory` and its missing parents below VIRGO_HOME as 0700 (whatever the umask).

    True when `directory` itself was created here, so it is empty. The common case (a persona's
    next generation) costs one mkdir. `sync=False` leaves making the new entries durable to the
    caller's flush of the whole filesystem; `chmod=False` is for a caller that found the umask
    keeps 0700 as it is (_umask_keeps_owner_bits).
    """
    try:
        os.mkdir(directory, DIR_MODE)
    except FileExistsError:
        return False
    except FileNotFoundError:
        parent = directory.parent
        if parent == Path(settings.VIRGO_HOME):
            private_directory(parent)
        else:
            _private_dirs(parent, sync=sync, chmod=chmod)
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            return False
    if chmod:
        os.chmod(directory, DIR_MODE)
    if sync:
        _fsync_dir(directory.parent)
    return True


def _generation_dirs(directory: Path, *, chmod: bool) -> bool:
    """_private_dirs(directory, sync=False) for a batch's generation directory.

    A first generation's persona most likely has no directory yet: its three directories are
    made from the top (three mkdirs) rather than found missing from the bottom (five). Where
    the persona's directory is there after all, or its parent is not, _private_dirs takes over.
    """
    if directory.name != "1":
        return _private_dirs(directory, sync=False, chmod=chmod)
    persona = directory.parent.parent
    try:
        os.mkdir(persona, DIR_MODE)
    except (FileExistsError, FileNotFoundError):
        return _private_dirs(directory, sync=False, chmod=chmod)
    for made in (persona, directory.parent, directory):
        if made is not persona:
            os.mkdir(made, DIR_MODE)
        if chmod:
            os.chmod(made, DIR_MODE)
    return True


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
    if not _private_dirs(path.parent):
        _sweep_abandoned(path.parent)
    temporary = _write_temporary(path, data, sync=True)
    try:
        os.link(temporary, path)
    except FileExistsError:
        return _same_or_conflict(path, data)
    finally:
        temporary.unlink()
    _fsync_dir(path.parent)
    return path


def write_stamp_files(files: Sequence[tuple[Path, bytes]]) -> dict[Path, StampFileConflict]:
    """write_stamp_file for many files, with one filesystem flush in all (see the module's
    docstring for why that is as safe).

    Returns the conflicts by path; every other file is written (or was already there, identical)
    when this returns.
    """
    conflicts: dict[Path, StampFileConflict] = {}
    pending: list[tuple[Path, bytes, Path]] = []
    chmod = not _umask_keeps_owner_bits()
    try:
        for path, data in files:
            # A directory made just now holds nothing, so only an older one needs looking into.
            if not _generation_dirs(path.parent, chmod=chmod):
                if path.exists():
                    _note_conflict(conflicts, path, data)
                    continue
                _sweep_abandoned(path.parent)
            pending.append((path, data, _write_temporary(path, data, sync=False, chmod=chmod)))
        if not pending:
            return conflicts
        _flush_filesystem(Path(settings.VIRGO_HOME))
        for path, data, temporary in pending:
            try:
                os.link(temporary, path)
            except FileExistsError:
                _note_conflict(conflicts, path, data)
    finally:
        for _, _, temporary in pending:
            temporary.unlink(missing_ok=True)
    return conflicts


def _sweep_abandoned(directory: Path) -> None:
    """Remove the temporary stamp files that killed writers left in a generation's directory."""
    cutoff = time.time() - ABANDONED_AFTER_SECONDS
    prefix = f".{STAMP_FILE_NAME}."
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)


def _note_conflict(conflicts: dict[Path, StampFileConflict], path: Path, data: bytes) -> None:
    try:
        _same_or_conflict(path, data)
    except StampFileConflict as conflict:
        conflicts[path] = conflict


def _write_temporary(path: Path, data: bytes, *, sync: bool, chmod: bool = True) -> Path:
    """A private temporary file beside `path` holding `data`, fsynced unless `sync` is False
    (and given its mode by fchmod unless `chmod` is False: _private_dirs)."""
    temporary = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        if chmod:
            os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return temporary


def _flush_filesystem(directory: Path) -> None:
    """Make every write to the filesystem holding `directory` durable (Linux syncfs(2)).

    Where the C library has no syncfs, sync(2) flushes every filesystem instead: slower, as safe.
    """
    syncfs = getattr(_LIBC, "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(directory))
    finally:
        os.close(fd)


def _same_or_conflict(path: Path, data: bytes) -> Path:
    if path.read_bytes() != data:
        raise StampFileConflict(
            f"{path} already holds a different stamp; a stamp file is never rewritten"
        )
    return path
