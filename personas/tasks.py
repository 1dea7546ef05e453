"""Celery tasks: thin shells that take ids and call the services. All are idempotent."""

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

from personas.models import Persona
from virgo import metrics
from virgo.outages import BROKER

logger = logging.getLogger(__name__)


def queue_after_commit(task: Any, *args: Any) -> None:
    """Queue `task` once the current transaction commits, without ever failing the change.

    The queue is only the fast path: what the task would do is recorded as owed in the committed
    rows themselves, and the reconciler pays it. So a broker that is down when the change
    commits costs a warning and a delay, never the change, and never a 500; and while this
    process has just found it down (virgo.outages) the task is not even tried, so a frozen
    broker holds no request up for its timeout.
    """

    def send() -> None:
        if not BROKER.should_try("task"):
            return
        try:
            task.delay(*args)
        except BrokerUnavailable as exc:
            BROKER.failed("task", exc)
            logger.warning(
                "could not queue %s%r (%s); the reconciler will do it", task.name, args, exc
            )
        else:
            BROKER.succeeded()

    transaction.on_commit(send)


@shared_task(bind=True, max_retries=5, default_retry_delay=2, acks_late=True)
def settle_persona(self, persona_id: int) -> None:  # type: ignore[no-untyped-def]
    """Bring one persona up to date with the committed state: skills, generation, card."""
    from personas.publication import publish_generation
    from personas.services import settle_persona_batch

    settle_persona_batch([persona_id])
    publish_generation(persona_id)


@shared_task(acks_late=True)
def fan_out_skill_map() -> int:
    """Split the personas behind the current skill map into id ranges, a task per range.

    Only personas still behind are listed, so a fan-out that stopped halfway resumes where it
    stopped; a batch that fails is retried on its own while the rest go on.
    """
    from personas.services import skill_map_revision

    size = settings.VIRGO_RECOMPUTE_BATCH_SIZE
    behind = Persona.objects.filter(skill_map_revision__lt=skill_map_revision())
    ids = list(behind.order_by("pk").values_list("pk", flat=True))
    batches = [ids[i : i + size] for i in range(0, len(ids), size)]
    for batch in batches:
        settle_persona_range.delay(batch[0], batch[-1])
    return len(batches)


@shared_task(bind=True, max_retries=5, default_retry_delay=2, acks_late=True)
def settle_persona_range(self, first_id: int, last_id: int) -> int:  # type: ignore[no-untyped-def]
    """Recompute one id range of the fan-out, then publish every persona of it still owed.

    What the range owes is read back from the database, not from what this run changed: a run
    killed after its recompute committed leaves new generations unpublished, and the same task,
    redelivered (acks_late, reject on worker lost), resumes there instead of returning 0 and
    leaving them to the reconciler (VX-REL-5). Returns how many personas it published.
    """
    from personas.publication import publish_generations
    from personas.reconciliation import owed_personas
    from personas.services import settle_persona_batch

    in_range = {"pk__gte": first_id, "pk__lte": last_id}
    changed = settle_persona_batch(Persona.objects.filter(**in_range).values_list("pk", flat=True))
    metrics.FANOUT_PERSONAS_SETTLED.inc(len(changed))
    owed = list(owed_personas().filter(**in_range).values_list("pk", flat=True))
    publish_generations(owed)
    return len(owed)


@shared_task(acks_late=True)
def reconcile_owed() -> int:
    """Celery beat's periodic sweep: build every stamp and card the fast path left owed."""
    from personas.reconciliation import reconcile

    return reconcile().done
