"""Owner-private environment files: settings a process reads from a file, not from its parent.

Two files are read, both by virgo.settings before anything else: the one VIRGO_ENV_FILE names (the
launcher writes one for the MCP server it configures, serving.launcher, so the server's connection
settings and secrets never pass through the agent's environment; `make serve` writes one for the
commands an operator runs beside it), then the installation's own, `$VIRGO_HOME/virgo.env`, which
`make run` writes (`python -m virgo.envfile embedded`: the embedded flag and a generated
SECRET_KEY), so a command pasted into a new shell in the checkout finds the settings `make run`
used. The format is dotenv, read with python-dotenv (no `${...}` interpolation: a secret is taken
as written). Real environment variables win over both files, and the first file over the second.

A file is loaded only when it is owner-private: a regular file (not a symlink) owned by this
user, with no group or other permission bits; so is a file holding a single secret
(`read_secret_file`: VIRGO_OIDC_<NAME>_CLIENT_SECRET_FILE, an OpenID Connect client secret).
Anything else is a configuration error naming the variable and the fix, since a readable copy
of these secrets is the leak the file exists to prevent.
"""

import argparse
import contextlib
import io
import os
import secrets
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from dotenv import dotenv_values

from virgo import kek

FILE_MODE = 0o600
DIR_MODE = 0o700
# The installation's own settings file, in VIRGO_HOME.
HOME_ENV_FILE = "virgo.env"
# Where VIRGO_HOME is when the environment does not say: `var/` in the checkout (as in settings).
DEFAULT_HOME = Path(__file__).resolve().parent.parent / "var"


def home_env_file(home: str | os.PathLike[str]) -> Path:
    return Path(home) / HOME_ENV_FILE


def read_env_file(
    path: str | os.PathLike[str] | None, *, variable: str = "VIRGO_ENV_FILE", required: bool = True
) -> dict[str, str]:
    """The names and values the owner-private file at `path` holds.

    `path` None or empty reads nothing. A missing file is an error when `required` (a file that
    was named must be there), else it holds nothing; `variable` is the setting that named the
    file, for the error.
    """
    if not path:
        return {}
    text = _read_private(path, variable=variable, required=required, kind="settings file")
    if text is None:
        return {}
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return {name: value for name, value in values.items() if value is not None}


def read_secret_file(path: str | os.PathLike[str], *, variable: str) -> str:
    """The one secret the owner-private file at `path` holds (a client secret...), without the
    line end a text editor adds. The same rules as a settings file: a regular file of this user
    that no one else may read or write, or a configuration error naming `variable` and the fix."""
    text = _read_private(path, variable=variable, required=True, kind="secret file")
    assert text is not None
    secret = text.rstrip("\r\n")
    if not secret:
        raise ImproperlyConfigured(f"{variable}: {path} is empty; write the secret into it")
    return secret


def _read_private(
    path: str | os.PathLike[str], *, variable: str, required: bool, kind: str
) -> str | None:
    """The text of the owner-private file at `path`; None when it is missing and not required."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        if not required:
            return None
        raise ImproperlyConfigured(
            f"{variable}: {path} does not exist; point {variable} at the {kind}, or unset it"
        ) from None
    except OSError as exc:
        raise ImproperlyConfigured(
            f"{variable}: {path} cannot be read as a plain file ({exc.strerror}); it must be an "
            f"owner-private {kind}, not a link or a directory"
        ) from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ImproperlyConfigured(
                f"{variable}: {path} is not a regular file; it must be an owner-private {kind}"
            )
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise ImproperlyConfigured(
                f"{variable}: {path} is not owner-private (mode "
                f"{stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}) and it holds "
                f"secrets; `chmod 600 {path}` as its owner"
            )
        return handle.read()


def load_env_file(
    path: str | os.PathLike[str] | None, *, variable: str = "VIRGO_ENV_FILE", required: bool = True
) -> list[str]:
    """Set each name the file at `path` holds that the environment does not hold already.

    Returns the names it set; `variable` and `required` are as for read_env_file.
    """
    loaded = []
    for name, value in read_env_file(path, variable=variable, required=required).items():
        if name not in os.environ:
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


def write_embedded_env_file(home: Path) -> Path:
    """The embedded default's settings in `home`/virgo.env, for every later command to find.

    VIRGO_EMBEDDED=1 always; SECRET_KEY generated once and then kept (sessions survive restarts),
    and so is VIRGO_KEY_ENCRYPTION_KEY (unless the file names a VIRGO_KEY_ENCRYPTION_KEY_FILE);
    VIRGO_PUBLIC_BASE_URL as this run has it, when it has one, so a command pasted into a new
    shell builds the links the running server builds. Whatever else the owner put in the file
    stays.
    """
    path = home_env_file(home)
    values = read_env_file(path, variable="VIRGO_HOME", required=False)
    values["VIRGO_EMBEDDED"] = "1"
    values.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    # The key-encryption key the signing keys are sealed under (virgo.kek), made once and kept:
    # a new one would leave every sealed key unopenable.
    if not values.get("VIRGO_KEY_ENCRYPTION_KEY_FILE"):
        values.setdefault("VIRGO_KEY_ENCRYPTION_KEY", kek.generate())
    if os.environ.get("VIRGO_PUBLIC_BASE_URL"):
        values["VIRGO_PUBLIC_BASE_URL"] = os.environ["VIRGO_PUBLIC_BASE_URL"]
    return write_env_file(path, values)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m virgo.envfile", description="Write Virgo's owner-private settings files."
    )
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("embedded", help="$VIRGO_HOME/virgo.env for the embedded default (make run)")
    save = actions.add_parser(
        "save",
        help="to PATH: what the file VIRGO_ENV_FILE names holds, if it names one, and the named "
        "variables of this environment that are set (make serve)",
    )
    save.add_argument("path", type=Path)
    save.add_argument("names", nargs="+")
    options = parser.parse_args(argv)
    try:
        if options.action == "embedded":
            path = write_embedded_env_file(Path(os.environ.get("VIRGO_HOME") or DEFAULT_HOME))
            print(f"Settings:   {path} (owner-private; real environment variables win)")
        else:
            values = read_env_file(os.environ.get("VIRGO_ENV_FILE"))
            values.update((name, os.environ[name]) for name in options.names if name in os.environ)
            write_env_file(options.path, values)
    except ImproperlyConfigured as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
