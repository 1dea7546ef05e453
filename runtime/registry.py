"""The prompt registry: learned answers to exact blocked operations.

A choice is keyed by (stamp hash, handler action, normalised target scope, operation shape) and
matched only exactly: a digest of the four, never a pattern. It is consulted only for an
operation the classifier sent to confirmation, on a tool the stamp grants, so it can neither grant
a tool nor lift a deny boundary. Because the stamp hash is in the key, a new stamp starts with an
empty registry; the owner carries entries forward only by reviewing them.

Entries live in the persona's experience layer. A genuinely class-common choice may live in the
shared class overlay instead; that layer is shared by personas of one class, so its entries are
keyed by the stamp's class-profile hash (class plus every tool's name, action and access) in
place of the persona-specific stamp hash, and only staff may write it. Both layers are database
rows that travel with a persona snapshot; nothing machine-local is consulted.

Only accepted entries apply. An entry a snapshot brought in waits, unkeyed, for review (`review`):
accepted, it is keyed from the fields it shows onto the stamp current at that moment, so it can
only ever answer the operation a human read.
"""

import hashlib
from dataclasses import dataclass
from typing import Any

import rfc8785
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from personas.models import Persona
from runtime.models import DecisionRecord, PromptRegistryEntry
from runtime.operations import Operation
from runtime.stamp import ActiveStamp, StampUnavailable, load_active_stamp

Location = PromptRegistryEntry.Location
Review = PromptRegistryEntry.Review


def key_digest(
    *, stamp_hash: str, handler_action: str, target_scope: dict[str, Any], shape: dict[str, Any]
) -> str:
    key = {
        "stamp_hash": stamp_hash,
        "handler_action": handler_action,
        "target_scope": target_scope,
        "operation_shape": shape,
    }
    return hashlib.sha256(rfc8785.dumps(key)).hexdigest()


def operation_digest(stamp: ActiveStamp, op: Operation, *, overlay: bool = False) -> str:
    return key_digest(
        stamp_hash=stamp.profile_hash if overlay else stamp.stamp_hash,
        handler_action=op.action,
        target_scope=op.scope_key,
        shape=op.shape,
    )


def lookup(*, persona: Persona, stamp: ActiveStamp, op: Operation) -> PromptRegistryEntry | None:
    """The learned choice for exactly this operation under exactly this stamp, if any."""
    entry = PromptRegistryEntry.objects.filter(
        location=Location.EXPERIENCE,
        persona=persona,
        review=Review.ACCEPTED,
        key_digest=operation_digest(stamp, op),
    ).first()
    if entry is not None:
        return entry
    return PromptRegistryEntry.objects.filter(
        location=Location.CLASS_OVERLAY,
        persona_class=stamp.persona_class,
        review=Review.ACCEPTED,
        key_digest=operation_digest(stamp, op, overlay=True),
    ).first()


def _entry_fields(record: DecisionRecord) -> dict[str, Any]:
    operation = record.operation
    target = {
        key: value
        for key, value in operation["target"].items()
        if key not in ("workspace", "project", "persona")
    }
    return {
        "handler_action": record.handler_action,
        "target_scope": target,
        "operation_shape": operation["shape"],
    }


@transaction.atomic
def learn(*, record: DecisionRecord, user: Any) -> PromptRegistryEntry:
    """Remember the routed human authority's answer to one decided request, for this stamp."""
    if record.decision == DecisionRecord.Decision.PENDING:
        raise ValidationError({"record": ["only a decided request can be remembered"]})
    if not (user.is_authenticated and record.authority_user_id == user.pk):
        raise PermissionDenied("only the human authority the request was routed to may teach it")
    fields = _entry_fields(record)
    entry = PromptRegistryEntry(
        location=Location.EXPERIENCE,
        persona=record.requester,
        stamp_hash=record.stamp_hash,
        choice=(
            PromptRegistryEntry.Choice.APPROVE
            if record.decision == DecisionRecord.Decision.APPROVED
            else PromptRegistryEntry.Choice.DENY
        ),
        learned_from=record,
        created_by=user,
        review=Review.ACCEPTED,
        key_digest=key_digest(stamp_hash=record.stamp_hash, **_key_args(fields)),
        **fields,
    )
    return _save_once(entry)


@transaction.atomic
def learn_for_class(*, record: DecisionRecord, user: Any) -> PromptRegistryEntry:
    """Put a decided request into the shared class overlay: staff only, it binds every owner."""
    if not (user.is_authenticated and getattr(user, "is_superuser", False)):
        raise PermissionDenied("only staff may change the shared class overlay")
    if record.decision == DecisionRecord.Decision.PENDING:
        raise ValidationError({"record": ["only a decided request can be remembered"]})
    stamp = load_active_stamp(Persona.objects.get(pk=record.requester_id))
    if stamp.stamp_hash != record.stamp_hash:
        raise ValidationError({"record": ["the persona's stamp changed since this request"]})
    fields = _entry_fields(record)
    entry = PromptRegistryEntry(
        location=Location.CLASS_OVERLAY,
        persona_class=stamp.persona_class,
        stamp_hash=stamp.profile_hash,
        choice=(
            PromptRegistryEntry.Choice.APPROVE
            if record.decision == DecisionRecord.Decision.APPROVED
            else PromptRegistryEntry.Choice.DENY
        ),
        learned_from=record,
        created_by=user,
        review=Review.ACCEPTED,
        key_digest=key_digest(stamp_hash=stamp.profile_hash, **_key_args(fields)),
        **fields,
    )
    return _save_once(entry)


def _key_args(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "handler_action": fields["handler_action"],
        "target_scope": fields["target_scope"],
        "shape": fields["operation_shape"],
    }


def _save_once(entry: PromptRegistryEntry) -> PromptRegistryEntry:
    try:
        with transaction.atomic():
            entry.save()
    except IntegrityError:
        raise ValidationError(
            {"entry": ["this exact operation already has a learned choice"]}
        ) from None
    return entry


@dataclass(frozen=True, slots=True)
class CarryOutcome:
    entry: PromptRegistryEntry
    carried: PromptRegistryEntry | None
    reason: str


@transaction.atomic
def carry_forward(*, entries: list[PromptRegistryEntry], reviewer: Any) -> list[CarryOutcome]:
    """The owner's review: copy experience entries onto their persona's current stamp hash.

    Each copy names the entry it came from and who reviewed it. An entry whose tool the new stamp
    no longer grants is not carried (a learned choice never outlives the capability it was about).
    """
    outcomes = []
    now = timezone.now()
    for entry in entries:
        persona = (
            Persona.objects.select_related("agent").filter(pk=entry.persona_id).first()
            if entry.persona_id
            else None
        )
        if entry.location != Location.EXPERIENCE or persona is None:
            outcomes.append(CarryOutcome(entry, None, "only experience-layer entries are carried"))
            continue
        if not (reviewer.is_authenticated and persona.agent.owner_id == reviewer.pk):
            raise PermissionDenied("only the persona's owner may review its learned choices")
        if entry.review != Review.ACCEPTED:
            waiting = entry.review == Review.PENDING
            reason = (
                "it waits for review: accept it instead"
                if waiting
                else "its stamp was revoked"
                if entry.review == Review.REVOKED
                else "it was rejected"
            )
            outcomes.append(CarryOutcome(entry, None, reason))
            continue
        try:
            stamp = load_active_stamp(persona)
        except StampUnavailable as exc:
            outcomes.append(CarryOutcome(entry, None, f"no standing stamp: {exc.reason}"))
            continue
        if entry.stamp_hash == stamp.stamp_hash:
            outcomes.append(CarryOutcome(entry, None, "already on the current stamp"))
            continue
        if entry.handler_action not in stamp.handlers:
            outcomes.append(
                CarryOutcome(entry, None, f"the new stamp no longer grants {entry.handler_action}")
            )
            continue
        digest = key_digest(
            stamp_hash=stamp.stamp_hash,
            handler_action=entry.handler_action,
            target_scope=entry.target_scope,
            shape=entry.operation_shape,
        )
        if PromptRegistryEntry.objects.filter(
            location=Location.EXPERIENCE, persona=persona, review=Review.ACCEPTED, key_digest=digest
        ).exists():
            outcomes.append(CarryOutcome(entry, None, "the current stamp already has this choice"))
            continue
        carried = PromptRegistryEntry.objects.create(
            location=Location.EXPERIENCE,
            persona=persona,
            stamp_hash=stamp.stamp_hash,
            handler_action=entry.handler_action,
            target_scope=entry.target_scope,
            operation_shape=entry.operation_shape,
            key_digest=digest,
            choice=entry.choice,
            learned_from=entry.learned_from,
            created_by=entry.created_by,
            review=Review.ACCEPTED,
            reviewed_by=reviewer,
            reviewed_at=now,
            carried_from=entry,
        )
        outcomes.append(CarryOutcome(entry, carried, "carried forward"))
    return outcomes


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    """`reviewed`: the entry was accepted or rejected now; otherwise `reason` says why not."""

    entry: PromptRegistryEntry
    reviewed: bool
    reason: str


_REVIEWED_FIELDS = ["stamp_hash", "key_digest", "review", "reviewed_by", "reviewed_at"]


@transaction.atomic
def review(
    *, entries: list[PromptRegistryEntry], reviewer: Any, accept: bool
) -> list[ReviewOutcome]:
    """Decide entries that wait for review (those a snapshot brought in).

    Accepted, an entry is keyed from the fields it shows (handler action, target scope, shape)
    onto its persona's current stamp (the class-profile hash for the class overlay) and applies
    from then on, to exactly that operation. Rejected, it never applies. The persona's owner
    reviews its experience layer; the shared class overlay is reviewed by staff. An entry that
    cannot apply yet (no standing stamp, a tool the stamp does not grant, the operation already
    answered) keeps waiting, with the reason.
    """
    outcomes = []
    now = timezone.now()
    locked = PromptRegistryEntry.objects.select_for_update(of=("self",)).select_related(
        "persona__agent", "imported_with__persona"
    )
    for entry in locked.filter(pk__in=[entry.pk for entry in entries]).order_by("pk"):
        persona = _review_persona(entry, reviewer)
        if entry.review != Review.PENDING:
            outcomes.append(ReviewOutcome(entry, False, "it was reviewed already"))
            continue
        if not accept:
            entry.review, entry.reviewed_by, entry.reviewed_at = Review.REJECTED, reviewer, now
            entry.save(update_fields=["review", "reviewed_by", "reviewed_at"])
            outcomes.append(ReviewOutcome(entry, True, "rejected: it never applies"))
            continue
        if persona is None:
            outcomes.append(ReviewOutcome(entry, False, "the persona it came with is gone"))
            continue
        try:
            stamp = load_active_stamp(persona)
        except StampUnavailable as exc:
            outcomes.append(ReviewOutcome(entry, False, f"no standing stamp: {exc.reason}"))
            continue
        if entry.handler_action not in stamp.handlers:
            outcomes.append(
                ReviewOutcome(entry, False, f"the stamp does not grant {entry.handler_action}")
            )
            continue
        overlay = entry.location == Location.CLASS_OVERLAY
        if overlay and stamp.persona_class != entry.persona_class:
            outcomes.append(
                ReviewOutcome(entry, False, f"its persona is no longer a {entry.persona_class}")
            )
            continue
        stamp_hash = stamp.profile_hash if overlay else stamp.stamp_hash
        entry.stamp_hash = stamp_hash
        entry.key_digest = key_digest(stamp_hash=stamp_hash, **_key_args(_shown_fields(entry)))
        entry.review, entry.reviewed_by, entry.reviewed_at = Review.ACCEPTED, reviewer, now
        try:
            with transaction.atomic():
                entry.save(update_fields=_REVIEWED_FIELDS)
        except IntegrityError:
            # The unique key of accepted entries: this exact operation is answered already.
            entry.refresh_from_db()
            outcomes.append(
                ReviewOutcome(entry, False, "the stamp already has a choice for this operation")
            )
            continue
        outcomes.append(ReviewOutcome(entry, True, "accepted: it applies from now on"))
    return outcomes


def _review_persona(entry: PromptRegistryEntry, reviewer: Any) -> Persona | None:
    """The persona whose stamp the entry is keyed onto, once `reviewer` may review it."""
    if entry.location == Location.CLASS_OVERLAY:
        if not (reviewer.is_authenticated and getattr(reviewer, "is_superuser", False)):
            raise PermissionDenied("only staff may review the shared class overlay")
        return entry.imported_with.persona if entry.imported_with else None
    if not (reviewer.is_authenticated and entry.persona.agent.owner_id == reviewer.pk):
        raise PermissionDenied("only the persona's owner may review its learned choices")
    return entry.persona


def _shown_fields(entry: PromptRegistryEntry) -> dict[str, Any]:
    return {
        "handler_action": entry.handler_action,
        "target_scope": entry.target_scope,
        "operation_shape": entry.operation_shape,
    }
