"""Writes to the revocation status list (VX-TRUST-7), in the caller's transaction.

A revocation sets its generations' bits and moves the list's version in the transaction that
revokes, so the list a peer reads and the tombstone its card answers change together: a
revocation rolled back flips nothing.
"""

from collections.abc import Sequence
from datetime import datetime

from django.db.models import F

from personas.models import StatusListEntry, StatusListVersion
from personas.status_list import VERSION_ROW


def status_list_changed() -> None:
    """Move the list's version: every web process renders and signs it again on its next
    request. The row is locked until the caller commits, so versions follow commit order (a
    process never keeps an older list under a newer version)."""
    moved = StatusListVersion.objects.filter(pk=VERSION_ROW).update(version=F("version") + 1)
    if moved:
        return
    # The row is missing only where the tables were emptied after migrating (a test flush).
    _, created = StatusListVersion.objects.get_or_create(pk=VERSION_ROW, defaults={"version": 1})
    if not created:
        StatusListVersion.objects.filter(pk=VERSION_ROW).update(version=F("version") + 1)


def status_revoke(*, generation_ids: Sequence[int], at: datetime) -> None:
    """Set the bits of these generations (one statement), and move the version."""
    StatusListEntry.objects.filter(generation__in=list(generation_ids)).update(revoked_at=at)
    status_list_changed()
