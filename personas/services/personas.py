"""A persona's own writes: creating, changing and deleting it.

persona_create and persona_update make what they are given at once (the owner's own setup and
confirmed edit); persona_submit and persona_draft, the channels that are not, hold a change that
widens the grant as a GrantProposal for the owner to decide (personas.services.proposals). Every
change is prepared the same way (_prepare_change: lock, apply, validate, open the next generation
in memory, diff its grant) and committed the same way (_commit_change).
"""

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from personas import audit, grant_review
from personas.models import Agent, AuditEvent, Generation, GrantProposal, Persona, RegisteredAddress
from personas.services.addresses import resolve_address
from personas.services.derivation import composition_hash, current_skill_map
from personas.services.generations import (
    _next_generation,
    _queue_settle,
    _refuse_what_would_not_stand,
    _settle_generation,
    _supersede_proposals,
    grant_diff,
)
from personas.services.revocation import _revoked_message, persona_purge, revoke_before_deleting
from personas.services.validation import User, _require_owner, _validate_persona
from virgo.canonical import sha256_hex

# What an owner authors of a persona, each editable through persona_update (discoverability is
# its own, audited operation).
PERSONA_FIELDS = (
    "name",
    "description",
    "system_prompt",
    "verb_subset",
    "queues",
    "persona_class",
    "address",
    "graph_namespace",
    "human_surface_bindings",
    "owning_lead",
    "ask_first_verbs",
)


# What a persona may do, beside what it is: a creation through a channel holds these for the owner.
GRANT_FIELDS = ("verb_subset", "queues", "human_surface_bindings", "ask_first_verbs")


def _apply_persona_changes(persona: Persona, changes: dict[str, Any]) -> None:
    unknown = sorted(set(changes) - set(PERSONA_FIELDS))
    if unknown:
        raise ValidationError({field: ["not an editable persona field"] for field in unknown})
    for field, value in changes.items():
        if field == "address" and not isinstance(value, RegisteredAddress):
            value = resolve_address(value)
        setattr(persona, field, value)


@audit.action
@transaction.atomic
def persona_create(*, agent: Agent, actor: User, **fields: Any) -> Persona:
    """Create a persona standing at once (once stamped): the owner's own setup, such as `make
    run`'s demo data. Every channel (the API, the CLI, an import) calls persona_draft, which holds
    the grant for the owner's approval. It is not discoverable until its owner lists it."""
    _require_owner(actor, agent)
    missing = [f for f in ("name", "system_prompt", "persona_class", "address") if f not in fields]
    if missing:
        raise ValidationError({field: ["this field is required"] for field in missing})
    persona = Persona(agent=agent)
    _apply_persona_changes(persona, fields)
    _validate_persona(persona)
    persona.save()
    _settle_generation(persona, current_skill_map())
    persona.save()
    _queue_settle(persona)
    _record_created(persona, actor, held=False)
    return persona


def _record_created(persona: Persona, actor: User, *, held: bool) -> None:
    audit.record(
        AuditEvent.Kind.PERSONA_CREATED,
        actor=actor,
        persona=persona,
        data={
            "name": persona.name,
            "persona": str(persona.uuid),
            "class": persona.persona_class,
            "address": persona.address.path if persona.address_id else "",
            "generation": persona.generation,
            "held": held,
        },
    )


def _comparable(field: str, value: Any) -> Any:
    if field == "address":
        return value.path if isinstance(value, RegisteredAddress) else value
    if field == "owning_lead":
        return str(value.uuid) if isinstance(value, Persona) else (str(value) if value else None)
    return value


def _changed_fields(persona: Persona, changes: dict[str, Any]) -> list[str]:
    """The fields of `changes` whose value differs from the stored persona's: what an edit
    changed, as the audit trail names it (a form posts every field, changed or not)."""
    stored = Persona.objects.select_related("address", "owning_lead").get(pk=persona.pk)
    return sorted(
        field
        for field, value in changes.items()
        if field not in PERSONA_FIELDS
        or _comparable(field, getattr(stored, field)) != _comparable(field, value)
    )


def _record_edited(
    persona: Persona, actor: User, changed: list[str], proposed: Generation | None
) -> None:
    audit.record(
        AuditEvent.Kind.PERSONA_EDITED,
        actor=actor,
        persona=persona,
        data={
            "name": persona.name,
            "fields": changed,
            "generation": proposed.number if proposed is not None else None,
        },
    )


class StaleProposal(ValidationError):
    """What a proposal would make is no longer what its owner was shown."""


@dataclass(frozen=True, slots=True)
class PersonaChange:
    """What became of a submitted change: made at once, or held as a proposal for the owner."""

    persona: Persona
    proposal: GrantProposal | None = None


def _locked_persona(persona: Persona) -> Persona:
    return (
        Persona.objects.select_for_update(of=("self",))
        .select_related("agent__owner", "address", "owning_lead")
        .get(pk=persona.pk)
    )


def _prepare_change(
    persona: Persona, actor: User, changes: dict[str, Any], *, draft: bool = False
) -> tuple[Persona, Generation | None, Generation | None, dict[str, Any] | None]:
    """Lock the persona, apply and validate `changes` in memory; the current generation, the
    unsaved next one (None when what the persona is does not change) and the grant diff between
    them. A change that would leave the persona unable to stand is refused here, naming the
    field (VX-GRANT-4). Nothing is written."""
    _require_owner(actor, persona.agent)
    persona = _locked_persona(persona)
    if persona.is_revoked:
        raise ValidationError({"persona": [_revoked_message(persona)]})
    current = persona.generations.filter(number=persona.generation).first()
    _apply_persona_changes(persona, changes)
    _validate_persona(persona, draft=draft)
    # Every change here is the owner's (_require_owner): the one kind that may follow a revoked
    # generation with a new one.
    next_generation = _next_generation(persona, current_skill_map(), current, by_owner=True)
    if next_generation is None:
        return persona, current, None, None
    diff = grant_diff(current=current, proposed=next_generation)
    _refuse_what_would_not_stand(diff)
    return persona, current, next_generation, diff


def _commit_change(persona: Persona, proposed: Generation | None) -> None:
    if proposed is not None:
        proposed.save()
        _queue_settle(persona)
        _supersede_proposals(persona)
    persona.save()


@audit.action
@transaction.atomic
def persona_update(
    *,
    persona: Persona,
    actor: User,
    expect_composition_hash: str | None = None,
    as_drafted: bool = False,
    **changes: Any,
) -> Persona:
    """Change what a persona is, at once: the owner's own confirmed change, and what approving
    a proposal does. Invalid input raises before anything is written.

    Channels that are not the owner's confirmed edit call persona_submit, which holds a change
    that widens the grant as a proposal. `expect_composition_hash` (an approval) refuses, as
    StaleProposal, a change whose next composition is not the one the owner reviewed;
    `as_drafted` compares it as it was proposed, with the draft's blank system prompt in place of
    the one the owner writes as they approve.
    """
    changed = _changed_fields(persona, changes)
    persona, _, proposed, _ = _prepare_change(persona, actor, changes)
    if expect_composition_hash is not None and (
        proposed is None or _as_proposed(proposed, as_drafted) != expect_composition_hash
    ):
        raise StaleProposal(
            {"proposal": ["stale: what it would make is no longer what it showed; propose again"]}
        )
    _commit_change(persona, proposed)
    _record_edited(persona, actor, changed, proposed)
    return persona


def _as_proposed(proposed: Generation, as_drafted: bool) -> str:
    if not as_drafted:
        return proposed.base_composition_hash
    return composition_hash({**proposed.composition, "system_prompt_sha256": sha256_hex(b"")})


@audit.action
@transaction.atomic
def persona_submit(
    *, persona: Persona, actor: User, via: GrantProposal.Via, **changes: Any
) -> PersonaChange:
    """A change through a channel that is not the owner's edit confirmed on the diff page: an
    API write (token or session), a CLI write, an import, the admin's save before review.

    A change that only narrows or keeps the grant (removes tools, verbs, queues, bindings;
    `allow` to `confirm`; a graph namespace below the current one; no grant field at all) is
    made at once, as persona_update makes it. One that widens it (every kind stamps.grant
    names: a tool, `confirm` to `allow`, a lifted condition, a queue, binding or writable path,
    a graph namespace above or beside, confirmations moved to a persona) is held whole as a
    pending GrantProposal: nothing that runs or is advertised changes until the owner approves
    it (proposal_approve).
    """
    changed = _changed_fields(persona, changes)
    persona, current, proposed, diff = _prepare_change(persona, actor, changes)
    if proposed is not None and current is not None and diff is not None and diff["widens"]:
        return _propose(persona, actor, via, changes, current, proposed, diff)
    _commit_change(persona, proposed)
    _record_edited(persona, actor, changed, proposed)
    return PersonaChange(persona)


def _propose(
    persona: Persona,
    actor: User,
    via: GrantProposal.Via,
    changes: dict[str, Any],
    current: Generation,
    proposed: Generation,
    diff: dict[str, Any],
    *,
    announce: bool = True,
) -> PersonaChange:
    """Hold the change as a pending proposal; `announce`: audit it as proposed (a draft's
    proposal is part of the persona's creation, audited as that)."""
    proposal = GrantProposal.objects.create(
        persona_id=persona.pk,
        via=via,
        changes=_stored_changes(changes),
        base_generation=current.number,
        next_composition_hash=proposed.base_composition_hash,
        diff=diff,
        proposed_by=actor if actor.is_authenticated else None,
    )
    if announce:
        audit.record(
            AuditEvent.Kind.PROPOSAL_MADE,
            actor=actor,
            persona=persona,
            data={
                "name": persona.name,
                "fields": sorted(changes),
                # In the words of the moment it was held: the personas by their name then.
                "widening": grant_review.widening_reasons(diff, persona.agent.owner_id),
                "base_generation": current.number,
                "via": via,
                "proposal": proposal.pk,
            },
        )
    return PersonaChange(Persona.objects.get(pk=persona.pk), proposal)


@audit.action
@transaction.atomic
def persona_draft(
    *,
    agent: Agent,
    actor: User,
    via: GrantProposal.Via,
    without_prompt: bool = False,
    **fields: Any,
) -> PersonaChange:
    """Create a persona through a channel that is not the owner's own setup: an API write (token
    or session), `virgo persona add`, a snapshot import, an A2A card import.

    The persona is made granting nothing (its grant fields empty), so its first generation does
    not stand: nothing of it runs or is advertised. Its grant (GRANT_FIELDS) is held as a pending
    GrantProposal the owner approves (proposal_approve). A persona that would not stand even with
    its grant is refused, naming the field, with nothing written (VX-GRANT-4).

    `without_prompt`: a draft (one made from an A2A card, which has no prompt): the owner writes
    the prompt as they approve.
    """
    _require_owner(actor, agent)
    if without_prompt and "system_prompt" in fields:
        raise ValidationError({"system_prompt": ["a draft starts without it"]})
    required = ("name", "persona_class", "address", *(() if without_prompt else ("system_prompt",)))
    missing = [f for f in required if f not in fields]
    if missing:
        raise ValidationError({field: ["this field is required"] for field in missing})
    whole = Persona(agent=agent)
    _apply_persona_changes(whole, {"system_prompt": "", **fields})
    _validate_persona(whole, draft=without_prompt)
    probe = _next_generation(whole, current_skill_map(), None)
    assert probe is not None
    probe_diff = grant_diff(current=None, proposed=probe)
    _refuse_what_would_not_stand(probe_diff)
    if not without_prompt and not probe_diff["widens"]:
        created = persona_create(agent=agent, actor=actor, **fields)
        _record_created(created, actor, held=False)
        return PersonaChange(created)
    grant = {field: fields.pop(field) for field in GRANT_FIELDS if field in fields}
    persona = Persona(agent=agent)
    empty: dict[str, Any] = {field: [] for field in GRANT_FIELDS}
    _apply_persona_changes(persona, {**fields, "system_prompt": whole.system_prompt, **empty})
    _validate_persona(persona, draft=without_prompt)
    persona.save()
    _settle_generation(persona, current_skill_map())
    persona.save()
    _queue_settle(persona)
    persona, current, proposed, diff = _prepare_change(persona, actor, grant, draft=without_prompt)
    if diff is None or proposed is None or current is None or not diff["widens"]:
        problems = "; ".join(diff["next_problems"]) if diff else "it changes nothing"
        raise ValidationError({"verb_subset": [f"would not make the persona stand: {problems}"]})
    change = _propose(persona, actor, via, grant, current, proposed, diff, announce=False)
    _record_created(change.persona, actor, held=True)
    return change


def _stored_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """The changes as JSON: the address by its path, the owning lead by its UUID."""
    stored = dict(changes)
    if isinstance(stored.get("address"), RegisteredAddress):
        stored["address"] = stored["address"].path
    if "owning_lead" in stored:
        lead = stored["owning_lead"]
        stored["owning_lead"] = str(lead.uuid) if isinstance(lead, Persona) else lead
    return stored


def _loaded_changes(proposal: GrantProposal) -> dict[str, Any]:
    changes = dict(proposal.changes)
    if changes.get("owning_lead"):
        lead = Persona.objects.filter(uuid=changes["owning_lead"]).first()
        if lead is None:
            raise StaleProposal({"proposal": ["stale: its owning lead no longer exists"]})
        changes["owning_lead"] = lead
    return changes


def persona_delete(*, persona: Persona, actor: User) -> None:
    """Delete a persona, revoked first so its card answers with a tombstone (VX-TRUST-9); one
    its owner or a moderator revoked before only as a superuser's purge."""
    if persona.tombstone() is not None:
        persona_purge(persona=persona, actor=actor)
        return
    _revoke_and_delete(persona, actor=actor)


@audit.action
@transaction.atomic
def _revoke_and_delete(persona: Persona, *, actor: User) -> None:
    _require_owner(actor, persona.agent)
    revoked = revoke_before_deleting(persona, actor=actor)
    audit.record(
        AuditEvent.Kind.PERSONA_DELETED,
        actor=actor,
        persona=persona,
        data=audit.deleted_persona_facts(persona, revoked=revoked),
    )
    persona.delete()
