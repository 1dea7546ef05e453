"""Owner-private environment files: settings a process reads from a file, not from its parent.

The launcher writes one for the MCP server it configures (runtime.launcher), so the server's
connection settings and secrets never pass through the agent's environment; virgo.settings
loads the file VIRGO_ENV_FILE names before it reads anything else. The format is dotenv, read
with python-dotenv (no `${...}` interpolation: a secret is taken as written). Real environment
variables win over the file, as dotenv's do.

A file is loaded only when it is owner-private: a regular file (not a symlink) owned by this
user, with no group or other permission bits. Anything else is a configuration error naming the
variable and the fix, since a readable copy of these secrets is the leak the file exists to
prevent.
"""

import contextlib
import io
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from dotenv import dotenv_values

FILE_MODE = 0o600
DIR_MODE = 0o700


def load_env_file(
    path: str | os.PathLike[str] | None, *, variable: str = "VIRGO_ENV_FILE", required: bool = True
) -> list[str]:
    """Set each name the file at `path` holds that the environment does not hold already.

    Returns the names it set. `path` None or empty loads nothing. A missing file is an error when
    `required` (a file that was named must be there), else nothing is loaded; `variable` is the
    setting that named the file, for the error.
    """
    if not path:
        return []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        if not required:
            return []
        raise ImproperlyConfigured(
            f"{variable} names {path}, which does not exist: point {variable} at the settings "
            "file, or unset it."
        ) from None
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{variable} names {path}, which cannot be read as a plain file ({exc.strerror}): "
            f"point {variable} at an owner-private settings file."
        ) from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ImproperlyConfigured(f"{variable} names {path}, which is not a regular file.")
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise ImproperlyConfigured(
                f"{variable} names {path}, which is not owner-private (mode "
                f"{stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}): it holds secrets; "
                f"`chmod 600 {path}` as its owner."
            )
        text = handle.read()
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    loaded = []
    for name, value in values.items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return loaded


def _quoted(value: str) -> str:
    # dotenv's single quotes take everything literally but `\\` and `\'`.
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_env_file(path: Path, values: Mapping[str, str]) -> Path:
    """Write `values` to `path` as an owner-private dotenv file, atomically.

    The directory is made owner-only; the bytes go to a 0600 temporary file beside `path`, which
    is fsynced and renamed over it, so a reader never sees half a file or a wider mode.
    """
    for name, value in values.items():
        if not name.isidentifier() or "\x00" in value:
            raise ValueError(f"{name!r} cannot be written to an environment file")
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path.parent, DIR_MODE)
    text = "".join(f"{name}={_quoted(value)}\n" for name, value in sorted(values.items()))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path
