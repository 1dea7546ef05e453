"""Celery tasks: thin shells that take ids and call the settling functions. All are idempotent.

Their names are the broker's contract (queued work, beat's schedule, the records that queue
them by name), so they keep the names they were registered under when they lived in
personas.tasks.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from cards.base_url import BaseUrlMismatch, check_base_url
from cards.keys import retire_due_keys
from cards.publishing import cards_owed_signatures, resign_cards
from personas.models import OrganizationDomain, Persona, Verification
from personas.proofs import check_domain
from personas.services import settle_persona_batch, skill_map_revision
from settling.publication import publish_generation, publish_generations, settle_and_publish
from settling.reconciliation import owed_personas, reconcile
from virgo import metrics

logger = logging.getLogger(__name__)


@contextmanager
def _publication(task: str) -> Iterator[None]:
    """Publication work, declined in one log line where this worker's public base URL is not the
    installation's (VX-SCALE-4): a worker that became so when the URL moved under it. What it
    declines stays owed, for a worker configured with the installation's URL or the reconciler
    there; and a task run eagerly in a request does not turn into a 500."""
    try:
        yield
    except BaseUrlMismatch as refused:
        logger.error("%s declined: %s; %s", task, refused, refused.fix)


def id_batches(ids: list[int], size: int) -> list[list[int]]:
    """The sorted `ids` in consecutive batches of at most `size`, the last ones smaller.

    Workers that take batches side by side finish a fan-out when its last batch ends, so with
    equal batches one of them can wait out most of a whole batch alone. Here each batch is a
    quarter of the ids left, kept between a quarter of `size` and `size` (guided
    self-scheduling): the batches shrink over the last few, and workers finish within a small
    batch of each other for a few more tasks in all.
    """
    if size < 1:
        # Batches of none would never take the ids left: refused rather than looped on.
        raise ValueError(f"a batch size must be at least 1, not {size}")
    smallest = -(-size // 4)
    batches: list[list[int]] = []
    start = 0
    while start < len(ids):
        left = len(ids) - start
        take = min(size, max(smallest, -(-left // 4)))
        batches.append(ids[start : start + take])
        start += take
    return batches


def _queue_ranges(task: Task, ids: list[int], size: int) -> int:
    """One `task(first_id, last_id)` per batch of the sorted `ids` (id_batches); how many were
    queued."""
    batches = id_batches(ids, size)
    for batch in batches:
        task.delay(batch[0], batch[-1])
    return len(batches)


@shared_task(
    name="personas.tasks.settle_persona",
    bind=True,
    max_retries=5,
    default_retry_delay=2,
    acks_late=True,
)
def settle_persona(self, persona_id: int) -> None:  # type: ignore[no-untyped-def]
    """Bring one persona up to date with the committed state: skills, generation, card."""
    with _publication("settle_persona"):
        settle_persona_batch([persona_id])
        publish_generation(persona_id)


@shared_task(name="personas.tasks.fan_out_skill_map", acks_late=True)
def fan_out_skill_map() -> int:
    """Split the personas behind the current skill map into id ranges, a task per range.

    Only personas still behind are listed, so a fan-out that stopped halfway resumes where it
    stopped; a batch that fails is retried on its own while the rest go on.
    """
    behind = Persona.objects.filter(skill_map_revision__lt=skill_map_revision())
    ids = list(behind.order_by("pk").values_list("pk", flat=True))
    return _queue_ranges(settle_persona_range, ids, settings.VIRGO_RECOMPUTE_BATCH_SIZE)


@shared_task(
    name="personas.tasks.settle_persona_range",
    bind=True,
    max_retries=5,
    default_retry_delay=2,
    acks_late=True,
)
def settle_persona_range(self, first_id: int, last_id: int) -> int:  # type: ignore[no-untyped-def]
    """Recompute, stamp and publish one id range of the fan-out (settle_and_publish), then
    publish every persona of it still owed.

    What the range still owes is read back from the database, not from what this run changed:
    a run killed after its recompute committed leaves new generations unpublished, and the same
    task, redelivered (acks_late, reject on worker lost), resumes there instead of returning 0
    and leaving them to the reconciler (VX-REL-5). Returns how many personas it published.
    """
    in_range = {"pk__gte": first_id, "pk__lte": last_id}
    with _publication("settle_persona_range"):
        changed = settle_and_publish(
            Persona.objects.filter(**in_range).values_list("pk", flat=True)
        )
        metrics.FANOUT_PERSONAS_SETTLED.inc(len(changed))
        owed = list(owed_personas().filter(**in_range).values_list("pk", flat=True))
        publish_generations(owed)
        return len({persona.pk for persona in changed} | set(owed))
    return 0


@shared_task(name="personas.tasks.reconcile_owed", acks_late=True)
def reconcile_owed() -> int:
    """Celery beat's periodic sweep: build every stamp and card the fast path left owed."""
    with _publication("reconcile_owed"):
        return reconcile().done
    return 0


@shared_task(name="settling.tasks.fan_out_resign", acks_late=True)
def fan_out_resign() -> int:
    """After the signing set changed (cards.keys): split the cards not signed by exactly the
    current set into persona-id ranges, a task per range. Only cards still owed are listed, so a
    fan-out queued twice, or again after a worker died, does only what is left."""
    ids = list(cards_owed_signatures().values_list("persona_id", flat=True))
    return _queue_ranges(resign_card_range, ids, settings.VIRGO_RESIGN_BATCH_SIZE)


@shared_task(
    name="settling.tasks.resign_card_range",
    bind=True,
    max_retries=5,
    default_retry_delay=2,
    acks_late=True,
)
def resign_card_range(self, first_id: int, last_id: int) -> int:  # type: ignore[no-untyped-def]
    """Sign again every card of one persona-id range still owed it; how many it signed. What is
    owed is read back from the database, so a redelivered run resumes where a killed one was."""
    owed = cards_owed_signatures().filter(persona_id__gte=first_id, persona_id__lte=last_id)
    with _publication("resign_card_range"):
        return resign_cards(list(owed.values_list("persona_id", flat=True)))
    return 0


@shared_task(name="settling.tasks.fan_out_republish", acks_late=True)
def fan_out_republish() -> int:
    """After the public base URL moved (cards.base_url.move_base_url): split the personas owed
    a card into id ranges, a settle_persona_range per range. What is owed is judged by this
    worker's URL, which must therefore be the new one: a worker still on the old one declines,
    and the reconciler on a machine with the new URL does the work."""
    with _publication("fan_out_republish"):
        check_base_url()
        ids = list(owed_personas().values_list("pk", flat=True))
        return _queue_ranges(settle_persona_range, ids, settings.VIRGO_RECOMPUTE_BATCH_SIZE)
    return 0


@shared_task(name="settling.tasks.retire_due_keys", acks_late=True)
def retire_signing_keys() -> int:
    """Celery beat's sweep: retire the rotated-out keys whose grace has ended."""
    return len(retire_due_keys())


# Organization domains (VX-ID-2) ----------------------------------------------------------------


@shared_task(name="settling.tasks.recheck_organization_domains", acks_late=True)
def recheck_organization_domains() -> int:
    """Celery beat's sweep: queue a check of every domain proven by DNS or HTTPS whose last
    check is older than VIRGO_DOMAIN_RECHECK_SECONDS; how many it queued. An operator's
    approval is no proof a check could find missing, so approved domains are left alone."""
    due = timezone.now() - timedelta(seconds=settings.VIRGO_DOMAIN_RECHECK_SECONDS)
    claims = OrganizationDomain.objects.filter(
        Q(checked_at__isnull=True) | Q(checked_at__lte=due),
        verification__in=[Verification.DNS_TXT, Verification.HTTPS_WELL_KNOWN],
    )
    ids = list(claims.order_by("pk").values_list("pk", flat=True))
    for claim_id in ids:
        recheck_organization_domain.delay(claim_id)
    return len(ids)


@shared_task(name="settling.tasks.recheck_organization_domain", acks_late=True)
def recheck_organization_domain(claim_id: int) -> bool:
    """Check one domain's proof again; whether it still holds. A proof no longer found
    un-verifies the domain, and every card that named it is settled again without it."""
    claim = OrganizationDomain.objects.filter(pk=claim_id).first()
    if claim is None:
        return False  # removed since the sweep listed it
    return check_domain(claim).is_verified
