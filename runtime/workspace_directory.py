"""One workspace directory for the whole installation, whichever machine answers (decision 275).

A persona's tools served over the network (`/mcp/<uuid>`) run on whichever web machine the load
balancer picks, and its workspace tools read and write `$VIRGO_HOME/workspaces` there: every
such machine must mount the one shared directory at that path, or a persona's files would
depend on the machine. The first process to serve a remote call writes a random marker into
`.virgo-workspaces` in its workspace directory and records it in the database
(`WorkspaceDirectory`); a machine whose directory does not hold the recorded marker is not
ready (/readyz `workspaces`, `check --deploy` runtime.E002) and refuses remote calls, rather than
answer from a directory of its own.
"""

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from runtime.models import WorkspaceDirectory

MARKER_FILE = ".virgo-workspaces"
_ROW = 1


class NotShared(Exception):
    """This machine's workspace directory is not the installation's: `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    @property
    def fix(self) -> str:
        return (
            f"mount the installation's shared workspace directory at {directory()} on every "
            "machine that serves personas' tools (docs/deploying.md: several machines)"
        )


def directory() -> Path:
    return Path(settings.VIRGO_HOME) / "workspaces"


def _marker_here() -> str | None:
    try:
        return (directory() / MARKER_FILE).read_text(encoding="ascii").strip() or None
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise NotShared(f"{directory() / MARKER_FILE} cannot be read: {exc}") from None


def recorded_marker() -> str | None:
    return WorkspaceDirectory.objects.filter(pk=_ROW).values_list("marker", flat=True).first()


def _compare(recorded: str) -> None:
    here = _marker_here()
    if here != recorded:
        found = "has no marker" if here is None else f"holds marker {here}"
        raise NotShared(
            f"{directory()} {found}, not the installation's ({recorded}): it is not the "
            "workspace directory the other machines share"
        )


def check_workspaces() -> None:
    """Raise NotShared when the installation has recorded its workspace directory and this
    machine's is another. Records nothing: /readyz and `check --deploy`."""
    recorded = recorded_marker()
    if recorded is not None:
        _compare(recorded)


def claim_workspaces() -> None:
    """check_workspaces for a process about to serve a remote call: with none recorded yet, this
    machine's directory becomes the installation's (its marker written first, then recorded)."""
    recorded = recorded_marker()
    if recorded is None:
        recorded = _record_first()
    _compare(recorded)


def _write_marker() -> str:
    """This directory's marker: a new one, unless another process wrote one first. Linked, not
    renamed, into place: a rename would replace a marker another worker has already recorded,
    leaving the directory refused by every machine."""
    marker = secrets.token_hex(16)
    target = directory()
    temporary = target / f".{MARKER_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(marker)
            os.link(temporary, target / MARKER_FILE)
        finally:
            temporary.unlink()
    except FileExistsError:
        written = _marker_here()
        if written is None:
            raise NotShared(f"{target / MARKER_FILE} is empty") from None
        return written
    except OSError as exc:
        raise NotShared(f"{target / MARKER_FILE} cannot be written: {exc}") from None
    return marker


def _record_first() -> str:
    marker = _marker_here() or _write_marker()
    try:
        with transaction.atomic():
            WorkspaceDirectory.objects.create(pk=_ROW, marker=marker, recorded_at=timezone.now())
    except IntegrityError:
        # Another machine recorded its directory at the same moment: that one is the
        # installation's, and this one is compared with it.
        return WorkspaceDirectory.objects.get(pk=_ROW).marker
    return marker
