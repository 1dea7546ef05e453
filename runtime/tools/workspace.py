"""A persona's workspace on disk and the five workspace tools that work on it.

Layout: `<VIRGO_HOME>/workspaces/<workspace>/<project or _scope>/<persona uuid>/`. A project duty
(`work/core/lead`) lives under its project; a reserved-root or scope-wide role (`root/secretary`,
`work/coordinator`) under `_scope`, which no project slug can spell (slugs never start with `_`).

Every path a caller gives is relative to the workspace root and normalised before anything
touches the disk: `..`, absolute paths, NUL and backslashes are refused, and so is any symlink that
resolves outside the root. Reads follow symlinks that stay inside; writes never go through a
symlink at all (each directory is opened with O_NOFOLLOW relative to its parent). Credential
locations (keys, `.env`, `.aws/`, `.kube/`...: the catalogue in runtime.credentials, judged on the
path as asked and as resolved) and lease/fence/authority material are never listed nor read: the
policy refuses them loudly before a tool runs, and the tools here refuse them again. A file whose
name is innocent but whose content holds a secret value is listed, and refused when read.
A file with more than one hard link is neither listed, stat'ed, read, hashed, written nor sent:
its other name may be `.env` or lie outside the workspace, and nothing here can tell which.

Writes are atomic (temporary file in the same directory, fsync, rename, directory fsync) and only
land on the mutable paths of the persona's binding: `QUEUE.md`, `DECISIONS.md`, `FINDINGS.md`,
`memory/**`, and whatever a class overlay adds (project worktrees).
"""

import base64
import contextlib
import errno
import fnmatch
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.credentials import credential_location, find_secret, is_secret_path
from runtime.packed import (
    PACKED_MAX_INPUT,
    Unscannable,
    find_in_bytes,
    packed_kind,
    secret_in_packed,
)
from runtime.tools.params import Choice, Integer, Key, Param, Text, check_declaration

SCOPE_WIDE_DIR = "_scope"
STANDARD_MUTABLE_PATHS: tuple[str, ...] = ("QUEUE.md", "DECISIONS.md", "FINDINGS.md", "memory/**")

READ_DEFAULT_LENGTH = 64 * 1024
READ_MAX_LENGTH = 256 * 1024
WRITE_MAX_BYTES = 1024 * 1024
FILE_MAX_BYTES = 16 * 1024 * 1024
LIST_DEFAULT_LIMIT = 200
LIST_MAX_LIMIT = 1000
MAX_PATH_LENGTH = 1024
# NAME_MAX of Linux file systems: a longer segment is refused before the disk is asked.
MAX_SEGMENT_BYTES = 255
_HASH_CHUNK = 1024 * 1024
_TEMP_PREFIX = ".~virgo-"

AUTHORITY_NAME_PATTERNS: tuple[str, ...] = (
    "*.lease",
    "*.fence",
    "*.lease.json",
    "*.fence.json",
    "lease",
    "leases",
    "fence",
    "fences",
    "authority.json",
    "*.authority",
)
# What configures an agent CLI or what git executes (VX-CONF-3): a persona that could write them
# would choose its own next launch's hooks, servers and permissions, or the commands git runs for
# its owner. Directories match as any segment, files by their name; case folded, as on a
# case-insensitive disk `.Claude` is `.claude`.
AGENT_CONFIGURATION_DIRECTORIES = frozenset(
    {".claude", ".codex", ".gemini", ".cursor", ".vscode", ".git", ".husky", ".devcontainer"}
)
AGENT_CONFIGURATION_FILES = frozenset({".mcp.json", ".claude.json", ".envrc"})


class WorkspaceError(Exception):
    """A refused or failed workspace operation; `code` is part of the tool result."""

    code = "workspace_error"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidArgument(WorkspaceError):
    code = "invalid_arguments"


class InvalidPath(InvalidArgument):
    code = "invalid_path"


class PathEscape(WorkspaceError):
    """The path leaves the workspace root: `..`, absolute, or a symlink pointing outside."""

    code = "path_escape"


class SecretPath(WorkspaceError):
    code = "secret_path"


class SecretContent(SecretPath):
    """The file's name is innocent, but what it holds looks like a secret credential value."""

    code = "secret_content"


class AuthorityPath(WorkspaceError):
    code = "authority_path"


class AgentConfiguration(WorkspaceError):
    code = "agent_configuration"


class NotMutable(WorkspaceError):
    code = "not_mutable"


class OutOfScope(WorkspaceError):
    code = "out_of_scope"


class SymlinkWrite(WorkspaceError):
    code = "symlink_write"


class NotFound(WorkspaceError):
    code = "not_found"


class WrongKind(WorkspaceError):
    code = "wrong_kind"


class Conflict(WorkspaceError):
    code = "conflict"


class TooLarge(WorkspaceError):
    code = "too_large"


class HardLinked(WorkspaceError):
    """A file with a second name: its content may be another path's (a secret, another scope)."""

    code = "hard_link"


def _single_link(info: os.stat_result, path: str) -> None:
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise HardLinked(
            f"{path!r} has {info.st_nlink} hard links: another name of the same file may be a "
            "secret or lie outside the workspace, so it is not read, written or sent"
        )


def _matches_any(name: str, patterns: tuple[str, ...]) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in patterns)


def is_authority_path(path: str) -> bool:
    """Whether any segment names lease, fence or authority material."""
    return any(_matches_any(part, AUTHORITY_NAME_PATTERNS) for part in path.split("/") if part)


def is_agent_configuration(path: str) -> bool:
    """Whether a normalised path configures an agent CLI or what git executes."""
    parts = [part.lower() for part in path.split("/") if part]
    return bool(parts) and (
        parts[-1] in AGENT_CONFIGURATION_FILES
        or any(part in AGENT_CONFIGURATION_DIRECTORIES for part in parts)
    )


def normalise_path(raw: object, *, allow_root: bool = False) -> str:
    """The canonical relative form of a caller's path, or InvalidPath / PathEscape.

    `.` segments and repeated slashes fold away; `..` is refused outright, even where it would
    stay inside, so that one spelling names one file.
    """
    if not isinstance(raw, str):
        raise InvalidPath("path must be a string")
    if "\x00" in raw:
        raise InvalidPath("path contains a NUL byte")
    if "\\" in raw:
        raise InvalidPath("path contains a backslash; use '/' between segments")
    if len(raw) > MAX_PATH_LENGTH:
        raise InvalidPath(f"path is longer than {MAX_PATH_LENGTH} characters")
    if any(ord(char) < 32 for char in raw):
        raise InvalidPath("path contains a control character")
    if raw.startswith("/") or raw.startswith("~"):
        raise PathEscape(f"path {raw!r} is absolute; paths are relative to the workspace root")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathEscape(f"path {raw!r} contains '..'")
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            raise InvalidPath(
                f"path segment {part[:40]!r}... is longer than {MAX_SEGMENT_BYTES} bytes"
            )
    normalised = "/".join(parts)
    if not normalised and not allow_root:
        raise InvalidPath("path must name a file inside the workspace")
    return normalised


def is_mutable(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether a normalised path is one of the binding's mutable paths.

    A pattern is an exact relative path (`QUEUE.md`), a directory followed by `/**`
    (`memory/**`), which covers everything strictly below that directory, or `**` alone for the
    whole workspace.
    """
    for pattern in patterns:
        if pattern == "**":
            return bool(path)
        if pattern.endswith("/**"):
            directory = pattern[:-3]
            if path.startswith(directory + "/") and len(path) > len(directory) + 1:
                return True
        elif path == pattern:
            return True
    return False


def workspace_root(*, workspace: str, project: str | None, persona_uuid: str) -> Path:
    base = Path(settings.VIRGO_HOME) / "workspaces"
    return base / workspace / (project or SCOPE_WIDE_DIR) / persona_uuid


@dataclass(frozen=True, slots=True)
class Workspace:
    """One persona's workspace: its root directory and the mutable paths of its binding."""

    root: Path
    mutable_paths: tuple[str, ...]
    readable_paths: tuple[str, ...] = ("**",)

    def ensure(self) -> Path:
        """Create the root if needed and return its resolved form.

        Every directory created on the way is owner-only (mkdir's `parents` would give the
        intermediate ones the umask's mode instead).
        """
        if not self.root.is_dir():
            missing = [self.root, *(p for p in self.root.parents if not p.exists())]
            for directory in reversed(missing):
                directory.mkdir(mode=0o700, exist_ok=True)
        return self.root.resolve(strict=True)

    # Resolution -------------------------------------------------------------------------------

    def resolve_inside(self, path: str, *, create: bool = True) -> tuple[Path, str]:
        """The real location of a normalised path and its real path relative to the root.

        Symlinks are followed; a result outside the root is a PathEscape. The resolved relative
        path is what secret checks must look at too, so a link named `notes.md` that points at
        `.env` is as secret as `.env`. Without `create` a missing root is not made: nothing
        lies under it, so the path resolves as it is spelt, as it would once the root is made.
        """
        root = self.ensure() if create else Path(os.path.realpath(self.root))
        real = Path(os.path.realpath(root / path)) if path else root
        if real != root and root not in real.parents:
            raise PathEscape(f"path {path!r} resolves outside the workspace")
        return real, real.relative_to(root).as_posix() if real != root else ""

    def escapes(self, path: str) -> bool:
        """Whether a normalised path leads outside the root through a symlink."""
        try:
            self.resolve_inside(path)
        except PathEscape:
            return True
        return False

    def _in_read_scope(self, path: str, *, directory: bool) -> bool:
        if "**" in self.readable_paths or is_mutable(path, self.readable_paths):
            return True
        # A directory on the way to a readable path may be listed, so the path can be found.
        return directory and any(
            pattern == path or pattern.startswith(f"{path}/") or not path
            for pattern in self.readable_paths
        )

    def _readable(self, path: str, *, directory: bool = False) -> tuple[Path, str]:
        if not self._in_read_scope(path, directory=directory):
            allowed = ", ".join(self.readable_paths)
            raise OutOfScope(f"{path!r} is outside the paths this tool may read ({allowed})")
        real, real_relative = self.resolve_inside(path)
        for candidate in (path, real_relative):
            if location := credential_location(candidate):
                raise SecretPath(
                    f"{path!r} looks like secret credential material ({location.reason})"
                )
            if is_authority_path(candidate):
                raise AuthorityPath(f"{path!r} is lease, fence or authority material")
        return real, real_relative

    # Tools -----------------------------------------------------------------------------------

    def list(self, path: str = "", *, cursor: int = 0, limit: int = LIST_DEFAULT_LIMIT) -> dict:
        """One page of a directory's entries, sorted by name, with the cursor of the next page."""
        limit = _bounded("limit", limit, 1, LIST_MAX_LIMIT)
        cursor = _bounded("cursor", cursor, 0, None)
        real, _ = self._readable(path, directory=True)
        if not real.exists():
            raise NotFound(f"{path or '.'!r} does not exist")
        if not real.is_dir():
            raise WrongKind(f"{path!r} is not a directory")
        entries = sorted(self._visible_entries(real, path), key=lambda entry: entry["name"])
        page = entries[cursor : cursor + limit]
        next_cursor = cursor + len(page)
        return {
            "path": path,
            "entries": page,
            "next_cursor": next_cursor,
            "total": len(entries),
            "done": next_cursor >= len(entries),
        }

    def _visible_entries(self, directory: Path, path: str) -> Iterator[dict[str, Any]]:
        with os.scandir(directory) as scan:
            for entry in scan:
                name = entry.name
                relative = f"{path}/{name}" if path else name
                if name.startswith(_TEMP_PREFIX):
                    continue
                if is_secret_path(relative) or is_authority_path(relative):
                    continue
                try:
                    _, real_relative = self.resolve_inside(relative)
                    info = os.stat(entry.path)
                except (PathEscape, FileNotFoundError):
                    continue
                if is_secret_path(real_relative) or is_authority_path(real_relative):
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    continue
                yield {
                    "name": name,
                    "path": relative,
                    "type": "directory" if stat.S_ISDIR(info.st_mode) else "file",
                    "size": info.st_size if stat.S_ISREG(info.st_mode) else None,
                    "modified": _iso(info.st_mtime),
                }

    def stat(self, path: str) -> dict:
        real, _ = self._readable(path, directory=True)
        try:
            info = real.stat()
        except FileNotFoundError:
            raise NotFound(f"{path!r} does not exist") from None
        _single_link(info, path)
        is_dir = stat.S_ISDIR(info.st_mode)
        return {
            "path": path,
            "type": "directory" if is_dir else "file",
            "size": None if is_dir else info.st_size,
            "modified": _iso(info.st_mtime),
            "mutable": not is_dir and is_mutable(path, self.mutable_paths),
        }

    def hash(self, path: str) -> dict:
        real, _ = self._readable(path)
        digest = hashlib.sha256()
        size = 0
        with self._open_regular(real, path) as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
                size += len(chunk)
        return {"path": path, "algorithm": "sha256", "sha256": digest.hexdigest(), "size": size}

    def read(self, path: str, *, offset: int = 0, length: int = READ_DEFAULT_LENGTH) -> dict:
        """A byte range of a file, with what a caller needs to ask for the next one.

        Text comes back as UTF-8; a range that would split a character ends before it, and
        `next_offset` starts there, so concatenating the pages gives the file back. Bytes that
        are not UTF-8 come back as base64 instead.
        """
        offset = _bounded("offset", offset, 0, None)
        length = _bounded("length", length, 1, READ_MAX_LENGTH)
        real, real_relative = self._readable(path)
        with self._open_regular(real, path) as handle:
            info = os.fstat(handle.fileno())
            total = info.st_size
            if kind := _secret_in(handle, info, real_relative):
                if kind.startswith(UNSCANNABLE):
                    raise SecretContent(
                        f"{path!r} cannot be scanned for secret credential values: "
                        f"{kind.removeprefix(UNSCANNABLE)}; it is not handed out unscanned"
                    )
                raise SecretContent(
                    f"{path!r} holds what looks like a secret credential value ({kind})"
                )
            handle.seek(offset)
            data = handle.read(length)
        content, encoding, used = _decode(data, at_end=offset + len(data) >= total)
        next_offset = offset + used
        return {
            "path": path,
            "content": content,
            "encoding": encoding,
            "offset": offset,
            "length": used,
            "next_offset": next_offset,
            "total_size": total,
            "done": next_offset >= total,
        }

    @contextlib.contextmanager
    def _open_regular(self, real: Path, path: str) -> Iterator[Any]:
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotFound(f"{path!r} does not exist") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise PathEscape(f"{path!r} changed into a symlink while it was opened") from None
            raise
        try:
            # Checked on the descriptor: fdopen refuses a directory itself, and leaves the
            # descriptor open when it does (one leaked per call would exhaust the process).
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise WrongKind(f"{path!r} is not a regular file")
            _single_link(info, path)
            handle = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        with handle:
            yield handle

    def write(
        self,
        path: str,
        content: str,
        *,
        mode: str = "replace",
        expected_sha256: str | None = None,
    ) -> dict:
        """Atomically create, replace, append to or delete a file on a mutable path.

        `expected_sha256` makes the write conditional on the current content (an empty string
        means the file must not exist yet), so two writers never lose each other's work silently.
        """
        if mode not in WRITE_MODES:
            raise InvalidArgument(f"mode must be one of {', '.join(WRITE_MODES)}")
        if is_authority_path(path):
            raise AuthorityPath(f"{path!r} is lease, fence or authority material")
        if is_agent_configuration(path):
            raise AgentConfiguration(
                f"{path!r} configures an agent CLI or what git runs: no persona's tool writes it"
            )
        if not is_mutable(path, self.mutable_paths):
            raise NotMutable(
                f"{path!r} is not a mutable path of this workspace binding "
                f"({', '.join(self.mutable_paths)})"
            )
        data = content.encode("utf-8")
        if len(data) > WRITE_MAX_BYTES:
            raise TooLarge(f"content is {len(data)} bytes; the limit is {WRITE_MAX_BYTES}")
        root = self.ensure()
        *directories, name = path.split("/")
        directory_fd = _open_directory_chain(root, directories, create=mode != "delete")
        try:
            current = _read_at(directory_fd, name, path)
            if expected_sha256 is not None:
                actual = hashlib.sha256(current).hexdigest() if current is not None else ""
                if actual != expected_sha256:
                    raise Conflict(f"{path!r} changed: its sha256 is {actual or 'absent'}")
            if mode == "delete":
                if current is None:
                    raise NotFound(f"{path!r} does not exist")
                os.unlink(name, dir_fd=directory_fd)
                os.fsync(directory_fd)
                return {"path": path, "mode": mode, "deleted": True}
            if mode == "create" and current is not None:
                raise Conflict(f"{path!r} already exists")
            if mode == "append" and current is not None:
                data = current + data
                if len(data) > FILE_MAX_BYTES:
                    raise TooLarge(f"appending would make {path!r} larger than the file limit")
            _atomic_replace(directory_fd, name, data, exclusive=mode == "create", path=path)
        finally:
            os.close(directory_fd)
        return {
            "path": path,
            "mode": mode,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }


WRITE_MODES = ("replace", "append", "create", "delete")


# What the five workspace tools take: the policy parses calls by it (before it classifies them:
# a delete is a confirm boundary), and the MCP server lists it.
_PATH = "A path relative to your workspace root."
TOOL_ARGUMENTS: dict[str, tuple[Param, ...]] = {
    "workspace.list": (
        Text("path", "A directory relative to your workspace root; the root if left out.",
             max_length=MAX_PATH_LENGTH, key=Key.TARGET),
        Integer("cursor", "Where the page starts: next_cursor of the page before.", default=0),
        Integer("limit", "How many entries at most.", default=LIST_DEFAULT_LIMIT, minimum=1,
                maximum=LIST_MAX_LIMIT),
    ),
    "workspace.stat": (
        Text("path", _PATH, required=True, max_length=MAX_PATH_LENGTH, key=Key.TARGET),
    ),
    "workspace.hash": (
        Text("path", _PATH, required=True, max_length=MAX_PATH_LENGTH, key=Key.TARGET),
    ),
    "workspace.read": (
        Text("path", _PATH, required=True, max_length=MAX_PATH_LENGTH, key=Key.TARGET),
        Integer("offset", "The byte to start at: next_offset of the read before.", default=0),
        Integer("length", "How many bytes at most.", default=READ_DEFAULT_LENGTH, minimum=1,
                maximum=READ_MAX_LENGTH),
    ),
    "workspace.write": (
        Text("path", f"{_PATH} Only your binding's mutable paths are written.", required=True,
             max_length=MAX_PATH_LENGTH, key=Key.TARGET),
        Text("content", f"The text to write: at most {WRITE_MAX_BYTES} bytes as UTF-8.",
             max_length=WRITE_MAX_BYTES, key=Key.DIGEST),
        Choice("mode", "replace, append, create (only if absent), or delete (asks first).",
               options=WRITE_MODES, default="replace"),
        Text("expected_sha256", "Write only if the file's sha256 is this now ('' = absent).",
             default=None, max_length=64),
    ),
}  # fmt: skip
for _declaration in TOOL_ARGUMENTS.values():
    check_declaration(_declaration)


def _open_directory_chain(root: Path, directories: list[str], *, create: bool) -> int:
    """An fd of the directory holding the target, reached without following any symlink."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    walked: list[str] = []
    try:
        for part in directories:
            walked.append(part)
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise NotFound(f"{'/'.join(walked)!r} does not exist") from None
                os.mkdir(part, 0o700, dir_fd=fd)
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _symlink_or_kind(fd, part, "/".join(walked)) from None
                raise
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _symlink_or_kind(directory_fd: int, name: str, path: str) -> WorkspaceError:
    info = os.lstat(name, dir_fd=directory_fd)
    if stat.S_ISLNK(info.st_mode):
        return SymlinkWrite(f"{path!r} is a symlink; writes never go through a symlink")
    return WrongKind(f"{path!r} is not a directory")


def _read_at(directory_fd: int, name: str, path: str) -> bytes | None:
    try:
        info = os.lstat(name, dir_fd=directory_fd)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkWrite(f"{path!r} is a symlink; writes never go through a symlink")
    if not stat.S_ISREG(info.st_mode):
        raise WrongKind(f"{path!r} is not a regular file")
    _single_link(info, path)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=directory_fd)
    with os.fdopen(fd, "rb") as handle:
        # Checked again on what was opened: a link made since the lstat counts too.
        _single_link(os.fstat(fd), path)
        return handle.read()


def _atomic_replace(
    directory_fd: int, name: str, data: bytes, *, exclusive: bool, path: str
) -> None:
    temp = f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(
        temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory_fd
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            # link() fails if the name exists, so a concurrent creator is never overwritten.
            try:
                os.link(temp, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
            except FileExistsError:
                raise Conflict(f"{path!r} already exists") from None
            os.unlink(temp, dir_fd=directory_fd)
        else:
            os.replace(temp, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
        os.fsync(directory_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory_fd)
        raise


# A file's verdict, by what identifies its bytes and its name (the name says how the detector
# reads it): a write replaces the file (a new inode), so a changed file is scanned again.
_SECRET_SCANS: dict[tuple[int, int, int, int, str], str | None] = {}
_SECRET_SCANS_MAX = 4096
_SCAN_CHUNK = 1024 * 1024
# What of a line cut by a chunk's end is carried into the next when the chunk holds no newline:
# more than any credential the detector finds in a long line (runtime.credentials), so one
# split across chunks is still seen whole.
_SCAN_OVERLAP = 4096


# A scan's verdict on content it could not read, beside the kinds of secret it found.
UNSCANNABLE = "unscannable: "
_PACKED_HEAD = 4096


def _secret_in(handle: Any, info: os.stat_result, name: str) -> str | None:
    """What kind of secret credential value the file holds, if any (V1-GB-4, VX-SEC-14).

    The whole file is judged, not the range asked for: a range that starts after a key's header
    would hand out the key's body, and pages chosen to split the header would hide it. Chunks
    end at a line's end, so each line is judged whole.
    """
    identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, name)
    if identity in _SECRET_SCANS:
        return _SECRET_SCANS[identity]
    kind, tail = None, ""
    handle.seek(0)

    def find(text: str) -> str | None:
        return find_secret(text, filename=name)

    while kind is None and (chunk := handle.read(_SCAN_CHUNK)):
        # Latin-1 maps each byte to one character: the detector sees ASCII as it is, and ASCII
        # in UTF-16 or UTF-32 as runs of characters between NULs.
        text = tail + chunk.decode("latin-1")
        cut = text.rfind("\n") + 1 or max(len(text) - _SCAN_OVERLAP, 0)
        text, tail = text[:cut], text[cut:]
        kind = find_in_bytes(text, find)
    if kind is None and tail:
        kind = find_in_bytes(tail, find)
    if kind is None:
        kind = _secret_in_packed(handle, info, name)
    if len(_SECRET_SCANS) >= _SECRET_SCANS_MAX:
        _SECRET_SCANS.clear()
    _SECRET_SCANS[identity] = kind
    return kind


def _secret_in_packed(handle: Any, info: os.stat_result, name: str) -> str | None:
    """Compressed, archived or wide-encoded content, unpacked and scanned (VX-SEC-15): what the
    byte scan above read as noise. Out of the scan's bounds, it is refused as unscannable."""
    handle.seek(0)
    if packed_kind(handle.read(_PACKED_HEAD)) is None:
        return None
    if info.st_size > PACKED_MAX_INPUT:
        return f"{UNSCANNABLE}packed and larger than the scan unpacks"
    handle.seek(0)
    try:
        return secret_in_packed(handle.read(), lambda text: find_secret(text, filename=name))
    except Unscannable as exc:
        return f"{UNSCANNABLE}{exc.reason}"


def _decode(data: bytes, *, at_end: bool) -> tuple[str, str, int]:
    """(content, encoding, bytes consumed) for one range of a file."""
    try:
        return data.decode("utf-8"), "utf-8", len(data)
    except UnicodeDecodeError as exc:
        # A character cut by the end of the range: stop before it, unless the file ends there.
        if not at_end and exc.reason == "unexpected end of data" and len(data) - exc.start < 4:
            head = data[: exc.start]
            if head:
                return head.decode("utf-8"), "utf-8", len(head)
        return base64.b64encode(data).decode("ascii"), "base64", len(data)


def _bounded(name: str, value: object, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer")
    if value < low or (high is not None and value > high):
        upper = f" and at most {high}" if high is not None else ""
        raise InvalidArgument(f"{name} must be at least {low}{upper}")
    return value


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat()
