"""A persona's generations: what a change to what it is opens, owes and settles.

A change that alters a persona's composition opens its next generation (its `standing` None: a
stamp owed) and queues the settling app's task by name, never importing who does the work. The
grant diff between two generations is asked of the stamp rules by name
(settings.VIRGO_GRANT_DIFF), and a change that would leave the persona unable to stand is refused
on it. A new generation makes the persona's pending proposals stale. settle_persona_batch
recomputes many personas at once after the verb->skill map changes.
"""

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from personas import audit
from personas.models import AuditEvent, Generation, GrantProposal, Persona
from personas.services.derivation import (
    SkillMap,
    composition_hash,
    composition_of,
    current_skill_map,
    derive_skills,
)
from personas.signals import personas_written
from virgo.bulk import update_each
from virgo.queueing import queue_after_commit

# The work a change owes, queued by the name its task is registered under (the broker's
# contract): the settling app does it, and the records never import who does.
SETTLE_PERSONA = "personas.tasks.settle_persona"
FAN_OUT_SKILL_MAP = "personas.tasks.fan_out_skill_map"


def _settle_generation(persona: Persona, skill_map: SkillMap, *, by_owner: bool = False) -> bool:
    """Derive the persona's skills and, when what it is changed, open its next generation.

    Runs inside the caller's transaction with the persona row locked. Returns whether a new
    generation was opened (its stamp is then owed and its card must be rendered). `by_owner`:
    the owner's own edit, the only change that may follow a revoked generation.
    """
    current = persona.generations.filter(number=persona.generation).first()
    generation = _next_generation(persona, skill_map, current, by_owner=by_owner)
    if generation is None:
        return False
    generation.save()
    return True


def _next_generation(
    persona: Persona, skill_map: SkillMap, current: Generation | None, *, by_owner: bool = False
) -> Generation | None:
    """Derive the persona's skills; the unsaved next generation if what it is changed, else None.

    `current` is the persona's generation numbered `persona.generation`, or None for a new one.
    After a revoked generation only the owner's own edit opens the next one (VX-TRUST-5): a
    recompute, a narrowed grant or a new identity chain never brings a revoked persona back.
    """
    persona.skill_map_revision = skill_map.revision
    derived = derive_skills(persona.verb_subset, skill_map.skills)
    persona.skills = [skill.card_entry() for skill in derived]
    composition = composition_of(persona)
    if current is not None and current.composition == composition:
        return None
    if persona.is_revoked or (current is not None and current.is_revoked and not by_owner):
        return None
    if current is not None:
        persona.generation += 1
    persona.standing = None
    return Generation(
        persona=persona,
        number=persona.generation,
        composition=composition,
        base_composition_hash=composition_hash(composition),
    )


def _queue_settle(persona: Persona) -> None:
    queue_after_commit(SETTLE_PERSONA, persona.pk)


def _supersede_proposals(persona: Persona) -> None:
    """A new generation makes every pending proposal of the persona stale: each was made
    against the generation before, and its diff no longer says what approving would do."""
    pending = GrantProposal.objects.filter(persona=persona, status=GrantProposal.Status.PENDING)
    superseded = list(pending.values_list("base_generation", flat=True))
    pending.update(status=GrantProposal.Status.STALE)
    for base_generation in superseded:
        audit.record(
            AuditEvent.Kind.PROPOSAL_STALE,
            persona=persona,
            data={
                "name": persona.name,
                "base_generation": base_generation,
                "why": f"generation {persona.generation} was made after it",
            },
            consequence=True,
        )


def grant_diff(*, current: Generation | None, proposed: Generation) -> dict[str, Any]:
    """The grant diff from the current generation to the unsaved `proposed` one, computed by the
    app that owns the stamp rules (settings.VIRGO_GRANT_DIFF names its function); it says,
    under `widens`, whether the change adds what the persona may do."""
    diff: dict[str, Any] = import_string(settings.VIRGO_GRANT_DIFF)(
        current=current, proposed=proposed
    )
    return diff


def _refuse_what_would_not_stand(diff: dict[str, Any]) -> None:
    if diff["refuses"]:
        raise ValidationError(
            {
                field: [f"the persona would not stand: {reason}" for reason in reasons]
                for field, reasons in diff["refuses"].items()
            }
        )


def settle_persona_batch(
    persona_ids: Iterable[int],
    *,
    before_save: Callable[[list[Generation]], None] | None = None,
) -> list[Persona]:
    """Recompute skills of many personas from the committed map, one transaction, few queries.

    Returns the personas that opened a new generation. Used by the Celery tasks; idempotent.
    Whatever the batch size, it reads the personas and their current generations in two
    queries and writes in three (new generations, changed personas, personas only behind).

    `before_save` is given the new generations, unsaved, each with its locked persona, before
    anything is written: the fan-out stamps them there (settling.publication), so that each
    generation and persona row is written once, with its outcome, in this transaction.
    """
    skill_map = current_skill_map()
    changed: list[Persona] = []
    behind_only: list[Persona] = []
    with transaction.atomic():
        personas = list(
            Persona.objects.select_for_update(of=("self",))
            .select_related("agent__owner__identity__organization_domain", "address", "owning_lead")
            .filter(pk__in=list(persona_ids))
            .order_by("pk")
        )
        # The rows are locked, so each persona's current number cannot move under this read.
        # Asked by (persona, number) pairs, which the unique index answers row for row, rather
        # than by a join on the persona's number, which reads every generation of each persona.
        wanted = {(persona.pk, persona.generation) for persona in personas}
        current = {
            generation.persona_id: generation
            for generation in Generation.objects.filter(
                persona__in=[persona.pk for persona in personas],
                number__in={persona.generation for persona in personas},
            ).order_by()
            if (generation.persona_id, generation.number) in wanted
        }
        generations: list[Generation] = []
        for persona in personas:
            behind = persona.skill_map_revision != skill_map.revision
            generation = _next_generation(persona, skill_map, current.get(persona.pk))
            if generation is not None:
                generations.append(generation)
                changed.append(persona)
            elif behind:
                behind_only.append(persona)
        if before_save is not None and generations:
            before_save(generations)
        Generation.objects.bulk_create(generations)
        now = timezone.now()
        for persona in changed:
            persona.updated_at = now
        update_each(
            changed, ["skills", "skill_map_revision", "generation", "standing", "updated_at"]
        )
        update_each(behind_only, ["skill_map_revision"])
        audit.record_each(
            AuditEvent.Kind.GENERATION,
            [
                (
                    persona,
                    {
                        "name": persona.name,
                        "generation": generation.number,
                        "why": "its skills or its owner's identity chain were recomputed",
                    },
                )
                for persona, generation in zip(changed, generations, strict=True)
            ],
            consequence=True,
        )
        # A bulk write sends no post_save: the changed cards' tokens move on this (cards.apps),
        # and again when each new generation's card is published after the commit.
        personas_written.send(Persona, uuids=[persona.uuid for persona in changed])
    return changed
