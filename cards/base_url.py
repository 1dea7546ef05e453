"""The installation's public base URL: recorded once, moved only on purpose (VX-SCALE-4).

Every card names the public base URL (its interface's url, its provider), and so does every
signature (`jku`), tombstone and status list. A stored card rendered under another URL than a
process's own is owed again (PublishedCard.is_current_for), so two machines configured with
different VIRGO_PUBLIC_BASE_URLs would each render and sign again the card the other had just
written: a new ETag on every other request, for ever, and no check would say why.

So the installation records one URL (PublicBaseUrl), and a process configured with another
signs and publishes nothing. The first process that signs records its own (a new installation
needs no step; an upgraded one records the URL most of its cards were published under, in the
migration). Where a process's URL differs, `check --deploy` fails (virgo.E031, cards.checks), a
worker does not start, /readyz reports `base_url` failed, publication tasks decline their work
(the reconciler on a machine with the right URL does it), and the card endpoint serves the card
as the installation published it, or answers 503 `base_url_mismatch`: never a new signature.

`virgo cards move-base-url URL` is the deliberate move: it records the new URL (audited) and
queues the publication of every card under it, which workers configured with it do.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from cards.models import PublicBaseUrl
from personas import audit
from personas.models import AuditEvent
from personas.services import status_list_changed
from virgo.public_url import normalise_base_url
from virgo.queueing import queue_after_commit

FAN_OUT_REPUBLISH = "settling.tasks.fan_out_republish"
_ROW = 1


class BaseUrlMismatch(Exception):
    """This process's VIRGO_PUBLIC_BASE_URL is not the installation's public base URL."""

    def __init__(self, *, recorded: str, configured: str) -> None:
        self.recorded = recorded
        self.configured = configured
        super().__init__(
            f"this process's VIRGO_PUBLIC_BASE_URL is {configured}, but the installation's "
            f"public base URL is {recorded}"
        )

    @property
    def fix(self) -> str:
        return (
            f"set VIRGO_PUBLIC_BASE_URL={self.recorded} on this machine, as on the others; or, "
            f"to move the installation, `virgo cards move-base-url {self.configured}`"
        )


def recorded_base_url() -> str | None:
    """The installation's public base URL; None before anything was signed."""
    return PublicBaseUrl.objects.filter(pk=_ROW).values_list("url", flat=True).first()


def _compare(recorded: str) -> None:
    if recorded != settings.VIRGO_PUBLIC_BASE_URL:
        raise BaseUrlMismatch(recorded=recorded, configured=settings.VIRGO_PUBLIC_BASE_URL)


def check_base_url() -> None:
    """Raise BaseUrlMismatch when the installation has recorded a URL and this process is
    configured with another. Records nothing: /readyz, `check --deploy`, a worker's start, the
    reconciler."""
    recorded = recorded_base_url()
    if recorded is not None:
        _compare(recorded)


def claim_base_url() -> None:
    """check_base_url for a process about to sign: with no URL recorded yet, this process's is
    recorded, so the installation's URL is the one its first signature names."""
    recorded = recorded_base_url()
    if recorded is None:
        recorded = _record_first(settings.VIRGO_PUBLIC_BASE_URL)
    _compare(recorded)


def _record_first(url: str) -> str:
    try:
        with transaction.atomic():
            PublicBaseUrl.objects.create(pk=_ROW, url=url, recorded_at=timezone.now())
    except IntegrityError:
        # Another process recorded its URL at the same moment: that one is the installation's.
        return PublicBaseUrl.objects.get(pk=_ROW).url
    return url


@dataclass(frozen=True)
class Move:
    before: str | None
    after: str

    @property
    def moved(self) -> bool:
        return self.before != self.after


def move_base_url(*, url: str) -> Move:
    """Make `url` (normalised) the installation's public base URL and queue the publication of
    every card under it; one audit record. ValueError saying why when `url` is not a public base
    URL; moving to the URL recorded already changes nothing."""
    after = normalise_base_url(url)
    with transaction.atomic():
        before = (
            PublicBaseUrl.objects.select_for_update()
            .filter(pk=_ROW)
            .values_list("url", flat=True)
            .first()
        )
        if before == after:
            return Move(before, after)
        PublicBaseUrl.objects.update_or_create(
            pk=_ROW, defaults={"url": after, "recorded_at": timezone.now()}
        )
        # Moved by an operator at a command line: the audit context names their account.
        audit.record(AuditEvent.Kind.BASE_URL_MOVED, data={"from": before or "", "to": after})
        queue_after_commit(FAN_OUT_REPUBLISH)
        # The status list names the URL as its issuer: every process renders it again, and one
        # configured with another URL then refuses to.
        status_list_changed()
    return Move(before, after)
