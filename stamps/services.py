"""Building and recording a generation's stamp: the one write path of the stamps app.

Called by settling.publication (the Celery tasks) after every committed composition change.
Idempotent per (persona, generation): a generation whose outcome is recorded returns it; one
whose stamp is stored returns the stored stamp and never rebuilds or rewrites it.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F

from personas.models import Generation, Persona, RegisteredAddress
from personas.signals import personas_written
from personas.surfaces import binding_owners, canonical_uuid
from stamps import grant
from stamps.factory import PersonaIdentity, build_stamp, workspace_binding_for
from stamps.models import CapabilityStamp
from stamps.problems import Code, Problem, StampRejected
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.storage import StampFileConflict, write_stamp_file, write_stamp_files
from stamps.validation import Verdicts
from virgo.bulk import update_each
from virgo.canonical import composition_hash, sha256_hex, stamp_bytes


@dataclass(frozen=True)
class StampOutcome:
    generation: Generation
    stamp: CapabilityStamp | None
    reasons: list[str] = field(default_factory=list)

    @property
    def standing(self) -> bool:
        return self.stamp is not None


def owner_reference(owner_id: object) -> str:
    """How a stamp names its bound human authority: the owning user, resolved by the hub."""
    return f"user:{owner_id}"


def stamp_inputs(generation: Generation) -> dict[str, Any]:
    """The factory's inputs, all from the generation's immutable composition."""
    composition = generation.composition
    address = composition["address"]
    return {
        "persona": PersonaIdentity(
            id=composition["persona"],
            name=composition["name"],
            generation=generation.number,
            owner=owner_reference(generation.persona.agent.owner_id),
            owning_lead=composition["owning_lead"],
        ),
        "base_composition_hash": generation.base_composition_hash,
        "address": address,
        "persona_class": composition["persona_class"],
        "graph_namespace": composition["graph_namespace"],
        "human_surface_bindings": composition["human_surface_bindings"],
        "workspace": workspace_binding_for(
            address=address, persona_class=composition["persona_class"]
        ),
        "verb_subset": composition["verb_subset"],
        "queues": composition["queues"],
        # A composition made before ask-first verbs existed has none.
        "ask_first_verbs": composition.get("ask_first_verbs", []),
    }


def ownership_problems(generations: Sequence[Generation]) -> list[list[Problem]]:
    """VX-SEC-5, VX-SEC-13: the bindings and owning lead of each generation that are not its
    owner's, in the order given (a generation may be unsaved yet). Three queries at most,
    whatever the batch.

    Each human-surface binding must name a surface registered to the persona's owner (or the
    mailbox of one of the owner's personas), and the owning lead must be a persona of the same
    owner, or the stamp would send messages, or route confirmations, to someone else.
    """
    compositions = [generation.composition for generation in generations]
    surface_owners = binding_owners(
        binding for composition in compositions for binding in composition["human_surface_bindings"]
    )
    leads = {canonical_uuid(c["owning_lead"]) for c in compositions} - {None}
    lead_owners = {
        str(lead): owner
        for lead, owner in Persona.objects.filter(uuid__in=leads).values_list(
            "uuid", "agent__owner_id"
        )
    }
    problems: list[list[Problem]] = []
    for generation, composition in zip(generations, compositions, strict=True):
        owner = generation.persona.agent.owner_id
        found = [
            Problem(
                Code.NOT_THE_OWNERS,
                str(binding),
                f"human surface {binding!r} is not registered to the persona's owner (nor the "
                "mailbox of one of the owner's personas)",
            )
            for binding in composition["human_surface_bindings"]
            if surface_owners.get(binding) != owner
        ]
        lead = composition["owning_lead"]
        if lead and lead_owners.get(lead) != owner:
            found.append(
                Problem(
                    Code.NOT_THE_OWNERS,
                    str(lead),
                    f"owning lead {lead} is not a persona of the persona's owner",
                )
            )
        problems.append(found)
    return problems


def build_generation_stamp(
    *, generation: Generation, registry: HandlerRegistry = HANDLERS
) -> StampOutcome:
    """Build, validate, store and materialize one generation's stamp, or record why it fails.

    A stamp that fails validation is not written: the generation is recorded as not standing
    with every reason, and so is its persona while this is its current generation.
    """
    with transaction.atomic():
        generation = (
            Generation.objects.select_for_update(of=("self",))
            .select_related("persona__agent")
            .get(pk=generation.pk)
        )
        stored = CapabilityStamp.objects.filter(generation=generation).first()
        if stored is not None:
            # A lost file is restored from the stored bytes; an altered one is left for boot
            # validation to report, never overwritten.
            if not stored.path.exists():
                write_stamp_file(stored.path, stored.data)
            return StampOutcome(generation, stored)
        if generation.standing is False:
            return StampOutcome(generation, None, list(generation.not_standing_reasons))
        try:
            stamp, stamped = _store(generation, registry)
        except StampRejected as rejected:
            outcome = _set_rejected(generation, rejected)
        else:
            outcome = _set_standing(generation, stamp, stamped)
        _record(generation)
        return outcome


def build_current_stamp(
    *, persona: Persona, registry: HandlerRegistry = HANDLERS
) -> StampOutcome | None:
    generation = persona.generations.filter(number=persona.generation).first()
    if generation is None:
        return None
    return build_generation_stamp(generation=generation, registry=registry)


def build_current_stamps(
    *, personas: Sequence[Persona], registry: HandlerRegistry = HANDLERS
) -> list[StampOutcome]:
    """build_current_stamp for many personas: the same outcomes, a few queries per batch.

    One transaction locks every current generation, reads the stored stamps and registered
    addresses once, composes every new stamp, writes all their files in one batch
    (stamps.storage.write_stamp_files), then inserts the stamps and records every outcome in
    bulk. For generations already saved and owed their stamp (the reconciler, a resumed batch);
    the fan-out stamps its new generations before they are saved (StampBatch).
    """
    wanted = {(persona.pk, persona.generation) for persona in personas}
    outcomes: dict[int, StampOutcome] = {}
    with transaction.atomic():
        generations = [
            generation
            for generation in Generation.objects.select_for_update(of=("self",))
            .select_related("persona__agent")
            .filter(
                persona__in=[persona.pk for persona in personas],
                number__in={persona.generation for persona in personas},
            )
            .order_by("pk")
            if (generation.persona_id, generation.number) in wanted
        ]
        stored = {
            stamp.generation_id: stamp
            for stamp in CapabilityStamp.objects.filter(generation__in=generations)
        }
        owed: list[Generation] = []
        for generation in generations:
            stamp = stored.get(generation.pk)
            if stamp is not None:
                if not stamp.path.exists():
                    write_stamp_file(stamp.path, stamp.data)
                outcomes[generation.pk] = StampOutcome(generation, stamp)
            elif generation.standing is False:
                reasons = list(generation.not_standing_reasons)
                outcomes[generation.pk] = StampOutcome(generation, None, reasons)
            else:
                owed.append(generation)
        owed_outcomes, new_stamps = stamp_generations(owed, registry)
        outcomes |= {outcome.generation.pk: outcome for outcome in owed_outcomes}
        CapabilityStamp.objects.bulk_create(new_stamps)
        update_each(owed, _OUTCOME_FIELDS)
        for standing in (True, False):
            group = [generation.pk for generation in owed if generation.standing is standing]
            if group:
                # Only while the generation is still its persona's current one, as _record does.
                Persona.objects.filter(
                    generations__in=group, generation=F("generations__number")
                ).update(standing=standing)
        # Standing decides whether a card is public: its token moves (cards.apps).
        personas_written.send(
            Persona, uuids=[generation.composition["persona"] for generation in owed]
        )
    return [outcomes[generation.pk] for generation in generations]


def stamp_generations(
    generations: Sequence[Generation], registry: HandlerRegistry = HANDLERS
) -> tuple[list[StampOutcome], list[CapabilityStamp]]:
    """Build and validate each generation's stamp, write the files of those that stand (one
    batch, stamps.storage.write_stamp_files), and set every outcome on its generation: saved
    neither. Returns the outcomes, in order, and the new stamps' rows, to insert once their
    generations are stored (a generation may be unsaved yet: StampBatch)."""
    registered = set(
        RegisteredAddress.objects.filter(
            path__in={generation.composition["address"] for generation in generations}
        ).values_list("path", flat=True)
    )
    verdicts = Verdicts(registry=registry)
    outcomes: list[StampOutcome | None] = []
    composed: list[tuple[int, Generation, CapabilityStamp, grant.Grant]] = []
    for index, (generation, unowned) in enumerate(
        zip(generations, ownership_problems(generations), strict=True)
    ):
        try:
            stamp, stamped = _compose(generation, registry, registered, unowned, verdicts)
        except StampRejected as rejected:
            outcomes.append(_set_rejected(generation, rejected))
        else:
            outcomes.append(None)
            composed.append((index, generation, stamp, stamped))
    conflicts = write_stamp_files([(stamp.path, stamp.data) for _, _, stamp, _ in composed])
    stamps: list[CapabilityStamp] = []
    for index, generation, stamp, stamped in composed:
        conflict = conflicts.get(stamp.path)
        if conflict is None:
            stamps.append(stamp)
            outcomes[index] = _set_standing(generation, stamp, stamped)
        else:
            outcomes[index] = _set_rejected(generation, _file_conflict(stamp.path, conflict))
    return [outcome for outcome in outcomes if outcome is not None], stamps


class StampBatch:
    """The stamps of new generations, built before the generations are saved, so that each
    generation row is inserted with its outcome and each persona row written once with its
    standing (the fan-out: personas.services.settle_persona_batch's `before_save`)."""

    def __init__(self, registry: HandlerRegistry = HANDLERS) -> None:
        self.registry = registry
        self.generations: list[Generation] = []
        self._stamps: list[CapabilityStamp] = []

    def stamp(self, generations: list[Generation]) -> None:
        """Stamp these unsaved current generations of their locked personas: outcomes set on
        each, and on its persona, stamp files written; the rows wait for save()."""
        _, stamps = stamp_generations(generations, self.registry)
        for generation in generations:
            generation.persona.standing = generation.standing
        self.generations += generations
        self._stamps += stamps

    def save(self) -> None:
        """Insert the stamps, once their generations are stored (same transaction)."""
        CapabilityStamp.objects.bulk_create(self._stamps)


def _store(
    generation: Generation, registry: HandlerRegistry
) -> tuple[CapabilityStamp, grant.Grant]:
    address = generation.composition["address"]
    registered = set(RegisteredAddress.objects.filter(path=address).values_list("path", flat=True))
    [unowned] = ownership_problems([generation])
    stamp, stamped = _compose(generation, registry, registered, unowned)
    try:
        write_stamp_file(stamp.path, stamp.data)
    except StampFileConflict as conflict:
        raise _file_conflict(stamp.path, conflict) from None
    stamp.save()
    return stamp, stamped


def _compose(
    generation: Generation,
    registry: HandlerRegistry,
    registered: set[str],
    unowned: list[Problem],
    verdicts: Verdicts | None = None,
) -> tuple[CapabilityStamp, grant.Grant]:
    """Build, validate, canonicalise and hash the stamp: the row, unsaved, its file unwritten,
    and the grant it holds (what the generation's digest covers).

    `registered` holds the registered addresses among the batch's; `unowned` is what
    ownership_problems found for this generation.
    """
    inputs = stamp_inputs(generation)
    problems = list(unowned)
    if inputs["address"] not in registered:
        problems.insert(
            0,
            Problem(
                Code.ADDRESS,
                inputs["address"],
                f"address {inputs['address']!r} is not a registered address",
            ),
        )
    if problems:
        raise StampRejected(problems)
    document = build_stamp(**inputs, registry=registry, verdicts=verdicts)
    data = stamp_bytes(document)
    stamp = CapabilityStamp(
        generation=generation,
        persona_uuid=generation.composition["persona"],
        generation_number=generation.number,
        schema_version=document["schema_version"],
        stamp_hash=sha256_hex(data),
        body=data,
    )
    return stamp, grant.grant_of(document)


def _file_conflict(path: Path, conflict: StampFileConflict) -> StampRejected:
    return StampRejected([Problem(Code.FILE_CONFLICT, str(path), str(conflict))])


def _set_rejected(generation: Generation, rejected: StampRejected) -> StampOutcome:
    reasons = [problem.message for problem in rejected.problems]
    _set_outcome(generation, standing=False, reasons=reasons)
    return StampOutcome(generation, None, reasons)


def _set_standing(
    generation: Generation, stamp: CapabilityStamp, stamped: grant.Grant
) -> StampOutcome:
    _set_outcome(
        generation,
        standing=True,
        reasons=[],
        stamp_hash=stamp.stamp_hash,
        composition_hash=composition_hash(
            base_composition_hash=generation.base_composition_hash,
            stamp_hash=stamp.stamp_hash,
        ),
        grant_digest=grant.digest(stamped, salt=generation.persona.grant_salt),
        grant_definition=grant.GRANT_DEFINITION,
    )
    return StampOutcome(generation, stamp)


_OUTCOME_FIELDS = [
    "standing",
    "not_standing_reasons",
    "stamp_hash",
    "composition_hash",
    "grant_digest",
    "grant_definition",
]


def _set_outcome(
    generation: Generation,
    *,
    standing: bool,
    reasons: list[str],
    stamp_hash: str = "",
    composition_hash: str = "",
    grant_digest: str = "",
    grant_definition: str = "",
) -> None:
    generation.standing = standing
    generation.not_standing_reasons = reasons
    generation.stamp_hash = stamp_hash
    generation.composition_hash = composition_hash
    generation.grant_digest = grant_digest
    generation.grant_definition = grant_definition


def _record(generation: Generation) -> None:
    """Save the outcome set on the generation, and on its persona while it is the current one."""
    Generation.objects.filter(pk=generation.pk).update(
        **{field: getattr(generation, field) for field in _OUTCOME_FIELDS}
    )
    if Persona.objects.filter(pk=generation.persona_id, generation=generation.number).update(
        standing=generation.standing
    ):
        # Standing decides whether the card is public: its token moves (cards.apps), and again
        # after the commit, when publish_card follows.
        personas_written.send(Persona, uuids=[generation.composition["persona"]])
