"""Confirmation requests: routed, recorded before anything runs, answered only by their authority.

Routing follows the stamp's `authority`: a global-boundary confirmation goes to the persona's bound
human authority (its owner, reached through virgo-channel at the owner's authority surface; the
owner may also answer in the admin); a confirmation that crosses no global boundary, asked only
because the stamp gives the tool `access: confirm`, is deputy scope and goes to the owning lead
when the persona has one (a message in the lead's inbox, the card at its mailbox on the hub). A
persona never answers its own request, and nobody but the routed authority answers at all.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import rfc8785
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from personas.models import Persona
from personas.surfaces import canonical_uuid
from runtime import audit_trail
from runtime.models import AuthorityKind, DecisionRecord
from runtime.operations import Operation
from runtime.policy import Verdict
from runtime.redaction import redact_text
from runtime.stamp import ActiveStamp, StampUnavailable
from runtime.transport import transport
from stamps.services import owner_reference


@dataclass(frozen=True, slots=True)
class Authority:
    kind: str
    user: Any = None
    persona: Persona | None = None

    @property
    def label(self) -> str:
        if self.kind == AuthorityKind.HUMAN:
            return f"human authority {self.user.get_username()} via virgo-channel"
        assert self.persona is not None
        return f"owning lead {self.persona.uuid}"


def human_authority(stamp: ActiveStamp, persona: Persona) -> Any:
    """The owner the stamp routes to, which must be the persona's actual owner."""
    owner = persona.agent.owner
    if stamp.human_owner != owner_reference(owner.pk):
        raise StampUnavailable(
            f"persona {persona.uuid}: the stamp routes confirmations to {stamp.human_owner!r}, "
            "who is not the persona's owner"
        )
    return get_user_model().objects.get(pk=owner.pk)


def route(*, stamp: ActiveStamp, persona: Persona, verdict: Verdict) -> Authority:
    """The one authority that may answer: the owning lead for deputy scope, else the owner.

    A lead the stamp names must be another persona of the requester's own owner; any other
    (another owner's persona, one that is gone, the requester itself) routes nowhere, so nothing
    can be asked and the call is refused.
    """
    if verdict.boundary is None and stamp.owning_lead:
        lead = Persona.objects.filter(
            uuid=canonical_uuid(stamp.owning_lead), agent__owner_id=persona.agent.owner_id
        ).first()
        if lead is None or lead.pk == persona.pk:
            raise StampUnavailable(
                f"persona {persona.uuid}: owning lead {stamp.owning_lead} cannot take "
                "confirmations (it must be another persona of the same owner)"
            )
        return Authority(AuthorityKind.LEAD, persona=lead)
    return Authority(AuthorityKind.HUMAN, user=human_authority(stamp, persona))


def key_values(operation: dict[str, Any]) -> list[tuple[str, str]]:
    """Every value a learned choice of this (recorded) operation is keyed on, as a human reads
    it: the target, each argument of the shape, what the tool resolved; a fingerprint as its
    sha256 and length. Identity keys are shown too: they name the persona's own binding."""
    shape = operation.get("shape", {})
    pairs = [
        *operation.get("target", {}).items(),
        *shape.get("arguments", {}).items(),
        *((f"{name} (resolved)", value) for name, value in shape.get("resolved", {}).items()),
    ]
    return [(name, _shown(value)) for name, value in pairs]


def _shown(value: Any) -> str:
    if isinstance(value, dict) and set(value) >= {"sha256", "bytes"} and len(value) <= 3:
        mark = f"sha256 {value['sha256']} ({value['bytes']} bytes)"
        return f"redacted ({value['redacted']}): {mark}" if "redacted" in value else mark
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def operation_digest(op: Operation) -> str:
    """The digest of the real operation (secrets and all): what resuming a correlation id
    compares, while the record itself keeps only `op.recorded()`."""
    return hashlib.sha256(rfc8785.dumps(op.as_json())).hexdigest()


def request_confirmation(
    *,
    persona: Persona,
    stamp: ActiveStamp,
    op: Operation,
    verdict: Verdict,
    correlation_id: str,
    authority: Authority | None = None,
) -> DecisionRecord:
    """Write the durable pending request. Nothing of the operation has run when this returns.

    `authority` is the one handle() routed to while deciding; without it, routed here."""
    authority = authority or route(stamp=stamp, persona=persona, verdict=verdict)
    return DecisionRecord.objects.create(
        correlation_id=correlation_id,
        requester=persona,
        tool_name=op.tool,
        handler_action=op.action,
        operation=op.recorded(),
        operation_digest=operation_digest(op),
        stamp_hash=stamp.stamp_hash,
        boundary=verdict.boundary.value if verdict.boundary else "",
        rule=verdict.rule,
        reason=redact_text(verdict.reason),
        authority_kind=authority.kind,
        authority_user=authority.user,
        authority_persona=authority.persona,
    )


def notify_authority(record: DecisionRecord) -> None:
    """Send the pending request to its authority through the transport once it is committed."""
    transport().confirmation_requested(record)


def may_decide(record: DecisionRecord, *, user: Any = None, persona: Persona | None = None) -> bool:
    """Whether this principal is the routed authority of the request (and not its requester)."""
    if persona is not None and persona.pk == record.requester_id:
        return False
    if record.authority_kind == AuthorityKind.HUMAN:
        return (
            persona is None
            and user is not None
            and user.is_authenticated
            and user.is_active
            and user.pk == record.authority_user_id
        )
    return user is None and persona is not None and persona.pk == record.authority_persona_id


@transaction.atomic
def decide(
    *,
    record: DecisionRecord,
    approve: bool,
    user: Any = None,
    persona: Persona | None = None,
) -> DecisionRecord:
    """Answer a pending request as its routed authority: a human user, or the owning lead persona.

    The requester itself is refused first, so a model can never confirm its own request, even
    when it is (wrongly) routed to itself.
    """
    record = DecisionRecord.objects.select_for_update().get(pk=record.pk)
    if persona is not None and persona.pk == record.requester_id:
        raise PermissionDenied("a persona cannot confirm its own request")
    if not may_decide(record, user=user, persona=persona):
        raise PermissionDenied(f"only the routed authority ({record.authority_label}) may decide")
    if record.decision != DecisionRecord.Decision.PENDING:
        raise ValidationError({"decision": [f"already {record.decision}"]})
    record.decision = (
        DecisionRecord.Decision.APPROVED if approve else DecisionRecord.Decision.DENIED
    )
    record.decided_via = DecisionRecord.Via.AUTHORITY
    record.decided_by_user = user
    record.decided_by_persona = persona
    record.decided_at = timezone.now()
    record.save(
        update_fields=[
            "decision",
            "decided_via",
            "decided_by_user",
            "decided_by_persona",
            "decided_at",
        ]
    )
    audit_trail.confirmation_answered(record, user=user, persona=persona)
    return record
