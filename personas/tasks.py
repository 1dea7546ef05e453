"""Celery tasks: thin shells that take ids and call the services. All are idempotent."""

from celery import shared_task
from django.conf import settings

from personas.models import Persona


@shared_task(bind=True, max_retries=5, default_retry_delay=2, acks_late=True)
def settle_persona(self, persona_id: int) -> None:  # type: ignore[no-untyped-def]
    """Bring one persona up to date with the committed state: skills, generation, card."""
    from personas.publication import publish_generation
    from personas.services import settle_persona_batch

    settle_persona_batch([persona_id])
    publish_generation(persona_id)


@shared_task(acks_late=True)
def fan_out_skill_map() -> int:
    """Split every persona into id ranges and recompute each range as its own task.

    Ranges are fixed by id, so a batch that fails is retried on its own and the rest go on;
    re-running the whole fan-out is harmless (settling an up-to-date persona is a no-op).
    """
    size = settings.VIRGO_RECOMPUTE_BATCH_SIZE
    ids = list(Persona.objects.order_by("pk").values_list("pk", flat=True))
    batches = [ids[i : i + size] for i in range(0, len(ids), size)]
    for batch in batches:
        settle_persona_range.delay(batch[0], batch[-1])
    return len(batches)


@shared_task(bind=True, max_retries=5, default_retry_delay=2, acks_late=True)
def settle_persona_range(self, first_id: int, last_id: int) -> int:  # type: ignore[no-untyped-def]
    from personas.publication import publish_generation
    from personas.services import settle_persona_batch

    ids = Persona.objects.filter(pk__gte=first_id, pk__lte=last_id).values_list("pk", flat=True)
    changed = settle_persona_batch(ids)
    for persona in changed:
        publish_generation(persona.pk)
    return len(changed)
