"""What follows once a persona's generation is committed: its stamp is built, its card published.

The one place that knows both producers (stamps, cards) and their order; the tasks, the fan-out
and the reconciler all come through here.
"""

from collections.abc import Iterable, Sequence

from django.db import transaction

from cards.publishing import publish_card, publish_cards
from personas.models import Persona
from personas.services import settle_persona_batch
from stamps.services import StampBatch, build_current_stamp, build_current_stamps


def publish_generation(persona_id: int) -> None:
    """Stamp and publish the current generation of a persona.

    Idempotent per (persona, generation), so Celery retries and the batched fan-out may call it
    again freely; a deleted persona is skipped. The stamp comes first: a generation that does not
    stand is recorded before its card exists, so it is never advertised.
    """
    persona = (
        Persona.objects.select_related("agent__owner", "address").filter(pk=persona_id).first()
    )
    if persona is None:
        return
    outcome = build_current_stamp(persona=persona)
    if outcome is not None and outcome.generation.is_revoked:
        # Revoked after this task was queued: its card stays withdrawn (VX-TRUST-5).
        return
    if outcome is not None and outcome.generation.number == persona.generation:
        # The card pins the stamp just recorded (cards.models.PublishedCard.is_current_for).
        persona.standing = outcome.generation.standing
    publish_card(persona)


def publish_generations(persona_ids: Sequence[int]) -> None:
    """publish_generation for a batch of personas (the fan-out): stamps first, then cards.

    The same outcomes as one publish_generation per persona, in a few queries per batch.
    """
    personas = list(
        Persona.objects.select_related("agent__owner", "address")
        .filter(pk__in=list(persona_ids))
        .order_by("pk")
    )
    if not personas:
        return
    outcomes = build_current_stamps(personas=personas)
    standing = {outcome.generation.persona_id: outcome.generation.standing for outcome in outcomes}
    revoked = {
        outcome.generation.persona_id for outcome in outcomes if outcome.generation.is_revoked
    }
    for persona in personas:
        persona.standing = standing.get(persona.pk, persona.standing)
    publish_cards(
        [persona for persona in personas if persona.pk not in revoked],
        [outcome.generation for outcome in outcomes],
    )


def settle_and_publish(persona_ids: Iterable[int]) -> list[Persona]:
    """settle_persona_batch, then publish_generations of the personas it changed, in one pass
    (the fan-out's batch): each new generation is stamped before it is saved, so it and its
    persona are each written once, with their outcome, and nothing settled is read again.

    The personas that opened a new generation are returned. The stamps commit with their
    generations; the cards follow in their own transaction, as publish_generations writes them.
    """
    stamps = StampBatch()
    with transaction.atomic():
        changed = settle_persona_batch(persona_ids, before_save=stamps.stamp)
        stamps.save()
    publish_cards(changed, stamps.generations)
    return changed
