"""The OS sandbox `virgo launch` runs an agent CLI in (VX-CONF-2), built with bubblewrap.

Inside it the whole filesystem is read-only, and whatever holds a secret of the installation is
not there at all: VIRGO_HOME (the database file, `virgo.env`, each launch's `server.env`, the
stamps, the private services of `make serve`), the checkout's `var/`, every file a `*_FILE`
setting names, the SQLite file wherever it lies, the credential locations of the operator's home
(the same catalogue the workspace tools refuse by name: `.pgpass`, `.ssh`, ...) and the sockets
of local database servers. Only the persona's workspace and the agent's own home are writable.

The agent gets a process namespace of its own (it cannot see the launcher, whose memory holds
SECRET_KEY, nor read another process's environment), a fresh /proc, /dev and /tmp, a session of
its own (a terminal's input queue cannot be written through TIOCSTI into the owner's shell) and
dies with the launcher. The network is shared: the agent reaches its model and, on loopback, its
MCP server, which runs outside the sandbox in the launcher.

The environment is never written into bwrap's arguments (anyone may read a command line); the
agent's allow-listed environment is bwrap's own, which it hands on.
"""

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.credentials import credential_location
from serving.agent_clis import WorksIn

BWRAP = "bwrap"
INSTALL_HINT = "install bubblewrap (apt-get install bubblewrap)"
# Local database and broker servers listen here as well as on loopback; a socket with peer
# authentication would let the agent in as its user, with no password to steal.
SERVER_SOCKET_DIRECTORIES = (
    "/run/postgresql",
    "/var/run/postgresql",
    "/run/redis",
    "/var/run/redis",
)
# How far into the operator's dot-directories the credential catalogue is looked for.
HOME_DEPTH = 3
HOME_ENTRIES = 5000
SQLITE_JOURNALS = ("-wal", "-shm", "-journal")


class SandboxUnavailable(Exception):
    """The sandbox cannot be set up on this machine: `reason` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where the agent may write, and what it must not see."""

    writable: tuple[Path, ...]
    hidden: tuple[Path, ...]
    workdir: Path
    # What lies under /tmp and must still be read (the checkout, the agent's program): the
    # agent's /tmp is its own, empty.
    restored: tuple[Path, ...] = ()

    def argv(self, command: Sequence[str]) -> list[str]:
        """bwrap's command line that runs `command` in this sandbox."""
        argv = [
            BWRAP,
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--new-session",
            "--die-with-parent",
            "--cap-drop", "ALL",
        ]  # fmt: skip
        for path in self.restored:
            argv += ["--ro-bind", str(path), str(path)]
        for path in self.hidden:
            # A directory gives way to an empty one, a file to an empty file.
            argv += (
                ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
            )
        for path in self.writable:
            argv += ["--bind", str(path), str(path)]
        return [*argv, "--chdir", str(self.workdir), "--", *command]


def secret_locations(home: Path | None) -> list[Path]:
    """Every path of this installation (and its operator's home) that holds a secret."""
    candidates: list[Path] = [Path(settings.VIRGO_HOME), Path(settings.BASE_DIR) / "var"]
    environment_file = os.environ.get("VIRGO_ENV_FILE")
    if environment_file:
        candidates.append(Path(environment_file))
    for name in sorted(getattr(settings, "ENVIRONMENT_SETTINGS", ())):
        if name.endswith("_FILE") and os.environ.get(name):
            candidates.append(Path(os.environ[name]))
    for database in settings.DATABASES.values():
        if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
            name = Path(database["NAME"])
            candidates += [
                name,
                *(name.with_name(name.name + s) for s in ("-wal", "-shm", "-journal")),
            ]
    candidates += [Path(directory) for directory in SERVER_SOCKET_DIRECTORIES]
    if home is not None:
        candidates += _credential_entries(home)
    return candidates


def database_files(databases: Iterable[Mapping[str, Any]]) -> list[Path]:
    """The files of the SQLite databases among `databases`, with their journals."""
    files: list[Path] = []
    for database in databases:
        if database["ENGINE"].endswith("sqlite3") and str(database["NAME"]) != ":memory:":
            name = Path(database["NAME"])
            files += [name, *(name.with_name(name.name + s) for s in SQLITE_JOURNALS)]
    return files


def _credential_entries(home: Path) -> list[Path]:
    return [home / relative for relative in _entries(home) if credential_location(relative)]


def _entries(home: Path) -> Iterable[str]:
    """The home's own entries and, below its dot-directories (where programs keep their
    configuration: `.config/gh/hosts.yml`, `.docker/config.json`), theirs, to HOME_DEPTH levels
    and HOME_ENTRIES entries: a bounded look at well-known places, not a scan of the operator's
    projects."""
    pending = [""]
    seen = 0
    while pending and seen < HOME_ENTRIES:
        prefix = pending.pop(0)
        try:
            names = sorted(os.listdir(home / prefix))
        except OSError:
            continue
        for name in names[: HOME_ENTRIES - seen]:
            seen += 1
            relative = f"{prefix}/{name}" if prefix else name
            yield relative
            depth = relative.count("/") + 1
            if depth < HOME_DEPTH and relative.startswith(".") and (home / relative).is_dir():
                pending.append(relative)


def hidden_paths(candidates: Iterable[Path], *, keep: Iterable[Path]) -> tuple[Path, ...]:
    """The real locations of the candidates that exist, outermost first, none inside another.

    A location that holds a path the agent must keep (its workspace, its home) is still hidden:
    the kept path is bound back into the empty directory that replaces it. One that lies inside
    a kept path is refused: a secret in the agent's writable space cannot be hidden from it.
    """
    kept = [Path(os.path.realpath(path)) for path in keep]
    real = sorted({Path(os.path.realpath(path)) for path in candidates if os.path.lexists(path)})
    chosen: list[Path] = []
    for path in real:
        if any(path == outer or outer in path.parents for outer in chosen):
            continue
        for inner in kept:
            if path == inner or inner in path.parents:
                raise SandboxUnavailable(
                    f"{path} holds a secret of the installation inside {inner}, which the agent "
                    "may write: move it out of the workspace"
                )
        chosen.append(path)
    return tuple(chosen)


def build(
    *, workspace: Path, agent_home: Path, program: str, works_in: WorksIn = "workspace"
) -> Sandbox:
    """The sandbox of one launch: the workspace and the agent's home writable, secrets hidden;
    the agent starts in the one its CLI works in."""
    writable = (workspace, agent_home)
    operator_home = os.environ.get("HOME")
    candidates = secret_locations(Path(operator_home) if operator_home else None)
    needed = (Path(settings.BASE_DIR), Path(os.path.realpath(program)).parent)
    return Sandbox(
        writable=tuple(Path(os.path.realpath(path)) for path in writable),
        hidden=hidden_paths(candidates, keep=writable),
        workdir=Path(os.path.realpath(agent_home if works_in == "home" else workspace)),
        restored=tuple(sorted({path for path in map(_real, needed) if TMP in path.parents})),
    )


def for_agent_host(*, agent_home: Path, program: str, secrets: Iterable[Path]) -> Sandbox:
    """The sandbox of a launch on an agent host (serving.launch), where no installation lives:
    the agent's home alone is writable and its working directory; the credential locations of
    the operator's home and `secrets` (the launcher's OAuth tokens) are hidden."""
    operator_home = os.environ.get("HOME")
    candidates = [*secrets, *(_credential_entries(Path(operator_home)) if operator_home else ())]
    # The program as named (often a symlink in node_modules/.bin) and the package it resolves
    # to, where they lie under /tmp, which is the agent's own and empty.
    needed = {_real(Path(program).parent), _real(Path(program)).parent}
    return Sandbox(
        writable=(_real(agent_home),),
        hidden=hidden_paths(candidates, keep=(agent_home,)),
        workdir=_real(agent_home),
        restored=tuple(sorted(path for path in needed if TMP in path.parents)),
    )


TMP = Path("/tmp")


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def require_bwrap() -> str:
    """bwrap's path, having seen it set up an empty sandbox here; else SandboxUnavailable."""
    found = shutil.which(BWRAP)
    if found is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    probe = Sandbox(writable=(), hidden=(), workdir=Path("/")).argv(["true"])
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bwrap did not run: {exc}") from None
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise SandboxUnavailable(
            f"bwrap cannot set up a sandbox here ({said}): allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1) or run where they are allowed"
        )
    return found


def version() -> str:
    try:
        result = subprocess.run(
            [BWRAP, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() or "unknown"
