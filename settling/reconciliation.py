"""The reconciler: the slow, sure path behind the Celery fast path.

Nothing is lost between the database and the queue because the database alone says what is owed. A
change commits, in the same transaction as the persona itself, a new Generation whose `standing` is
None: that row is the durable marker of a stamp owed. A persona whose published card is older than
its generation, rendered under another public base URL, or missing, is owed a card. A persona whose
skills were derived from an older revision of the verb->skill map than the current one is owed a
recompute. The task queued on commit normally pays all of these within moments; when it could not be
queued (the broker was down) or died on the way (a worker killed), the marker stays, and the
reconciler (Celery beat, `manage.py reconcile`) finds it and calls the same idempotent settle and
publish functions.

Only a persona's current generation is owed a stamp: a generation superseded before its stamp
was built will never be the one a runtime reads.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from cards.base_url import check_base_url
from cards.models import PublishedCard
from cards.publishing import cards_owed_signatures, resign_cards
from personas.models import Generation, Persona
from personas.services import settle_persona_batch, skill_map_revision
from settling.publication import publish_generation
from virgo import progress

logger = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    owed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    # Cards signed again because the signing set changed since they were signed, and the
    # personas whose cards could not be.
    resigned: int = 0
    unsigned: list[int] = field(default_factory=list)

    @property
    def done(self) -> int:
        return len(self.owed) - len(self.failed)


def _owed_markers() -> tuple[QuerySet[Generation], QuerySet[PublishedCard]]:
    """The outer persona's current generation (its stamp is owed while its `standing` is None)
    and its card when that is current: the one statement of what a persona is owed."""
    # A revoked generation is owed nothing: it never stands nor is published again (VX-TRUST-5).
    current = Generation.objects.filter(
        persona=OuterRef("pk"), number=OuterRef("generation"), revoked_at__isnull=True
    )
    # A standing persona's card carries its pinned grant (PublishedCard.is_current_for).
    card_is_current = PublishedCard.objects.filter(
        Q(pinned=True) | ~Q(persona__standing=True),
        persona=OuterRef("pk"),
        generation__gte=OuterRef("generation"),
        base_url=settings.VIRGO_PUBLIC_BASE_URL,
    )
    return current, card_is_current


def owed_personas(*, settled_before: datetime | None = None) -> QuerySet[Persona]:
    """Personas whose current generation is owed its stamp or its card.

    `settled_before` leaves alone generations younger than that moment: their on-commit task is
    most likely still on its way, and racing it would only do the same work twice.
    """
    current, card_is_current = _owed_markers()
    if settled_before is not None:
        current = current.filter(created_at__lt=settled_before)
    return (
        Persona.objects.filter(Exists(current))
        .filter(
            Exists(current.filter(standing__isnull=True))
            | ~Exists(card_is_current)
            | Q(skill_map_revision__lt=skill_map_revision())
        )
        .order_by("pk")
    )


def owed_work() -> dict[str, int]:
    """How many personas are owed each kind of work now (the backlog /readyz and /metrics show).

    `recompute` is the skill-map fan-out's remaining work.
    """
    current, card_is_current = _owed_markers()
    counts = Persona.objects.filter(Exists(current)).aggregate(
        stamp=Count("pk", filter=Q(Exists(current.filter(standing__isnull=True)))),
        card=Count("pk", filter=~Q(Exists(card_is_current))),
        recompute=Count("pk", filter=Q(skill_map_revision__lt=skill_map_revision())),
    )
    return {work: int(count) for work, count in counts.items()} | {
        "signature": cards_owed_signatures().count()
    }


def _id_batches(personas: QuerySet[Persona], size: int) -> Iterator[list[int]]:
    """The ids of `personas`, in batches of `size`, each read when the one before is done."""
    last_id = 0
    while batch := list(personas.filter(pk__gt=last_id).values_list("pk", flat=True)[:size]):
        yield batch
        last_id = batch[-1]


def reconcile(*, grace: timedelta | None = None, batch_size: int | None = None) -> ReconcileReport:
    """Build every owed stamp and card, in batches of persona ids; one failure stops no other.

    Refused as a whole (BaseUrlMismatch) in a process whose public base URL is not the
    installation's: what it would find owed is every card, and it may publish none of them.
    """
    check_base_url()
    if grace is None:
        grace = timedelta(seconds=settings.VIRGO_RECONCILE_GRACE_SECONDS)
    batch_size = batch_size or settings.VIRGO_RECOMPUTE_BATCH_SIZE
    owed = owed_personas(settled_before=timezone.now() - grace)
    report = ReconcileReport()
    _resign_owed(report, batch_size)
    batches = progress.track(
        _id_batches(owed, batch_size), "owed personas reconciled", total=owed.count, steps=len
    )
    for batch in batches:
        settle_persona_batch(batch)
        for persona_id in batch:
            report.owed.append(persona_id)
            try:
                publish_generation(persona_id)
            except Exception:
                logger.exception("reconcile: publishing persona %s failed", persona_id)
                report.failed.append(persona_id)
    if report.resigned:
        logger.info("reconcile: %d cards signed again by the current keys", report.resigned)
    if report.owed:
        logger.info(
            "reconcile: %d personas owed work, %d done, %d failed",
            len(report.owed),
            report.done,
            len(report.failed),
        )
    return report


def _resign_owed(report: ReconcileReport, batch_size: int) -> None:
    """Sign again the cards a rotation's fan-out left (a worker died, the broker was down), in
    batches; a batch that fails is logged and counted failed, and the rest go on."""
    last_id = 0
    while batch := list(
        cards_owed_signatures()
        .filter(persona_id__gt=last_id)
        .values_list("persona_id", flat=True)[:batch_size]
    ):
        last_id = batch[-1]
        try:
            report.resigned += resign_cards(batch)
        except Exception:
            logger.exception(
                "reconcile: signing the cards of personas %s to %s failed", batch[0], batch[-1]
            )
            report.unsigned.extend(batch)
