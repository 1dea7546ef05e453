"""Revoking a persona, or one of its generations, at once (VX-TRUST-5).

The owner revokes their own; a moderator (superuser) may revoke any. What is revoked never stands
again, and a revoked persona never changes again: every write refused for that says so in the one
message kept here (_revoked_message).
"""

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from personas import audit
from personas.models import (
    AuditEvent,
    Generation,
    Persona,
    PurgedPersona,
    RevocationReason,
    Tombstone,
)
from personas.services.status_list import status_revoke
from personas.services.validation import User
from personas.signals import persona_revoked, personas_written
from virgo.bulk import update_each

REVOCATION_REASON_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Revocation:
    persona: Persona
    generations: list[int]
    reason_code: str
    at: Any


@audit.action
@transaction.atomic
def persona_revoke(
    *,
    persona: Persona,
    actor: User,
    reason_code: str,
    reason: str,
    via: str,
    generation: int | None = None,
) -> Revocation:
    """Revoke a persona, or one of its generations, at once (VX-TRUST-5).

    The owner revokes their own; a moderator (superuser) may revoke any. The revoked generations
    stop standing in this transaction and never stand again (the database refuses it), and
    their bits are set in the revocation status list (VX-TRUST-7); every web process withdraws
    the card on its next request (the card token moves, now and after the commit), its runtime
    refuses naming the revocation, and what waits on or was learned under the revoked stamps is
    cancelled or retired (`persona_revoked`, in this transaction).

    Without `generation` the persona itself is revoked, finally: it never changes again. A
    revoked generation alone is followed by the owner's next edit, a new generation.
    """
    persona = (
        Persona.objects.select_for_update(of=("self",)).select_related("agent").get(pk=persona.pk)
    )
    is_owner = actor.is_authenticated and persona.agent.owner_id == actor.pk
    is_moderator = actor.is_authenticated and getattr(actor, "is_superuser", False)
    if not (is_owner or is_moderator):
        raise PermissionDenied("only the persona's owner or a moderator may revoke it")
    errors: dict[str, list[str]] = {}
    if reason_code not in RevocationReason.values:
        errors["reason_code"] = [
            f"unknown reason code {reason_code!r}; one of {', '.join(RevocationReason.values)}"
        ]
    if not isinstance(reason, str) or not reason.strip():
        errors["reason"] = ["say why: the reason is kept in the audit event"]
    elif len(reason) > REVOCATION_REASON_LIMIT:
        errors["reason"] = [f"at most {REVOCATION_REASON_LIMIT} characters"]
    if persona.is_revoked:
        errors["persona"] = [_revoked_message(persona)]
    generations = Generation.objects.select_for_update().filter(persona=persona)
    if generation is not None:
        generations = generations.filter(number=generation)
        found = generations.first()
        if found is None:
            errors["generation"] = [f"persona {persona.uuid} has no generation {generation}"]
        elif found.is_revoked:
            errors["generation"] = [f"generation {generation} is already revoked"]
    if errors:
        raise ValidationError(errors)
    now = timezone.now()
    revoked = list(generations.filter(revoked_at__isnull=True).order_by("number"))
    who = "its owner" if is_owner else "a moderator"
    note = f"revoked by {who} at {now.isoformat()} ({reason_code})"
    for revoked_generation in revoked:
        revoked_generation.revoked_at, revoked_generation.revocation_reason = now, reason_code
        revoked_generation.standing = False
        revoked_generation.not_standing_reasons = [
            note,
            *revoked_generation.not_standing_reasons,
        ]
    update_each(revoked, ["revoked_at", "revocation_reason", "standing", "not_standing_reasons"])
    # Their bits in the status list, in this transaction (VX-TRUST-7): a persona revoked sets
    # every generation's not yet set, a generation its own only.
    status_revoke(generation_ids=[g.pk for g in revoked], at=now)
    numbers = [revoked_generation.number for revoked_generation in revoked]
    fields = ["updated_at"]
    if generation is None:
        persona.revoked_at, persona.revocation_reason = now, reason_code
        fields += ["revoked_at", "revocation_reason"]
    if generation is None or generation == persona.generation:
        persona.standing = False
        fields.append("standing")
    persona.save(update_fields=fields)
    audit.record(
        AuditEvent.Kind.REVOKED,
        actor=actor,
        persona=persona,
        agent=persona.agent,
        data={
            "name": persona.name,
            "scope": "persona" if generation is None else "generation",
            "generations": numbers,
            "reason_code": reason_code,
            "reason": reason,
            "via": via,
            "as": "owner" if is_owner else "moderator",
        },
    )
    persona_revoked.send(
        Persona,
        persona=persona,
        stamp_hashes=[g.stamp_hash for g in revoked if g.stamp_hash],
    )
    personas_written.send(Persona, uuids=[persona.uuid], after_commit=True)
    return Revocation(persona, numbers, reason_code, now)


def _revoked_message(persona: Persona) -> str:
    assert persona.revoked_at is not None
    return (
        f"persona {persona.uuid} was revoked at {persona.revoked_at.isoformat()} "
        f"({persona.revocation_reason}); a revoked persona never changes again: create a new one"
    )


KEPT_TOMBSTONE = (
    "it is revoked, and its tombstone answers whoever holds its card, so its owner cannot delete "
    "it; a superuser may purge it, which keeps the tombstone"
)


@audit.action
@transaction.atomic
def persona_purge(*, persona: Persona, actor: User) -> None:
    """Delete a revoked persona (or one whose current generation is revoked), keeping what its
    tombstone says and recording who purged it (VX-TRUST-5). Only a superuser may: its owner
    may revoke it, never unsay the revocation."""
    if not (actor.is_authenticated and getattr(actor, "is_superuser", False)):
        raise PermissionDenied(f"persona {persona.name!r}: {KEPT_TOMBSTONE}")
    persona = (
        Persona.objects.select_for_update(of=("self",)).select_related("agent").get(pk=persona.pk)
    )
    keep_tombstone(persona, actor=actor)
    persona.delete()


DELETED_BY_ITS_OWNER = "deleted by its owner: its card answers with its tombstone"


def revoke_before_deleting(persona: Persona, *, actor: User) -> list[int]:
    """A persona going by its owner's deletion is revoked first (VX-TRUST-9), in the deleting
    transaction: its status bits are set and its tombstone kept, so a peer holding its signed
    card learns it is gone (410 and the list) rather than finding it missing (404) and its bit
    unset. The numbers of the generations revoked, for the deletion's own audit event (the
    deleting service is the action: the revocation and the tombstone are part of it)."""
    revocation = persona_revoke(
        persona=persona,
        actor=actor,
        reason_code=RevocationReason.RETIRED,
        reason=DELETED_BY_ITS_OWNER,
        via="deletion",
    )
    persona.refresh_from_db()
    _store_tombstone(persona, actor=actor)
    return revocation.generations


def keep_tombstone(persona: Persona, *, actor: User | None, via: str = "purge") -> None:
    """Before a revoked persona's row goes, keep what its tombstone says (PurgedPersona) and
    say so in the audit trail; nothing for a persona that is not revoked, or kept already.

    Also connected to pre_delete (personas.apps), so no way of deleting the row, a cascade
    from its agent or owner included, takes the tombstone with it. The event names the persona
    and its agent in its data only: both rows may be going in the same deletion.
    """
    tombstone = _store_tombstone(persona, actor=actor)
    if tombstone is None:
        return
    audit.record(
        AuditEvent.Kind.PURGED,
        actor=actor,
        data={
            "persona": str(persona.uuid),
            "name": persona.name,
            "agent": persona.agent_id,
            "agent_name": persona.agent.name,
            "via": via,
            "revoked_at": tombstone.revoked_at.isoformat(),
            "reason_code": tombstone.reason,
            "generation": tombstone.generation,
        },
    )


def _store_tombstone(persona: Persona, *, actor: User | None) -> Tombstone | None:
    """The persona's tombstone, kept as its PurgedPersona row in `actor`'s name; None for a
    persona that is not revoked, or whose tombstone is kept already."""
    tombstone = persona.tombstone()
    if tombstone is None or PurgedPersona.objects.filter(uuid=persona.uuid).exists():
        return None
    PurgedPersona.objects.create(
        uuid=persona.uuid,
        revoked_at=tombstone.revoked_at,
        revocation_reason=tombstone.reason,
        generation=tombstone.generation,
        listed=persona.discoverable,
        purged_by=actor,
    )
    return tombstone


def tombstone_kept_on_delete(sender: type[Persona], instance: Persona, **kwargs: Any) -> None:
    keep_tombstone(instance, actor=None, via="deletion")
