"""Confirmation requests, routed through virgo-channel to the authority that must answer them.

A global-boundary confirmation goes to the requester's bound human authority: its owner, at the
owner's authority surface on the hub (AuthoritySurface), answerable only by the principal the hub
attests there. A deputy-scope confirmation goes to the owning lead persona: a coordination message
in its inbox says what is asked, and the card waits at its mailbox on the hub
(`virgo:persona/<uuid>`), answerable only by that persona. The card carries the correlation id,
the normalised operation as the decision record keeps it (its target and shape whole: every
value a learned choice would be keyed on; secret values and credential-file content only as a
marker) and approve/deny actions; the answer comes back through the signed callback
(channel.callbacks).

Delivery follows the same discipline as the tools: a Delivery row per correlation id, written
before the request leaves, the correlation id as Idempotency-Key, an unknown outcome sent again
(by `redeliver_pending`) with the very same request.
"""

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from channel.client import ChannelClient, ChannelNotConfigured, Outcome
from channel.deliveries import request_digest
from channel.models import AuthoritySurface, Delivery
from personas.models import Persona
from personas.surfaces import PERSONA_MAILBOX, owned_surface
from runtime.models import AuthorityKind, CoordinationMessage, DecisionRecord
from runtime.tools.params import SHOWN_WHOLE_MAX

ROUTE = "/confirmations"
# Strings longer than this are cut in the card (the decision record keeps the whole operation);
# no value a key holds as is is longer (runtime.tools.params.check_declaration).
_CARD_STRING_LIMIT = SHOWN_WHOLE_MAX
_RETRYABLE = (Delivery.Status.PENDING, Delivery.Status.UNKNOWN, Delivery.Status.FAILED)


class Unroutable(Exception):
    """The authority has no address on the hub yet: the request waits (and the admin shows it)."""


def authority_address(record: DecisionRecord) -> tuple[str, dict[str, str]]:
    """Where the request goes on the hub and which principal may answer it."""
    if record.authority_kind == AuthorityKind.LEAD:
        lead = record.authority_persona
        assert lead is not None
        return f"{PERSONA_MAILBOX}{lead.uuid}", {"kind": "persona", "id": str(lead.uuid)}
    surface = AuthoritySurface.objects.filter(user_id=record.authority_user_id).first()
    if surface is None or owned_surface(record.authority_user_id, surface.binding) is None:
        # A surface the owner gave up may since be another owner's: it is never used.
        raise Unroutable(
            f"{record.authority_user} has no authority surface among their human surfaces on "
            "the hub; the request waits in the admin until one is set"
        )
    return surface.binding, {"kind": "human", "id": surface.principal}


def _card_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _CARD_STRING_LIMIT:
        return value[:_CARD_STRING_LIMIT] + f"… ({len(value)} characters in all)"
    if isinstance(value, dict):
        return {key: _card_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_card_value(item) for item in value]
    return value


def confirmation_request(
    record: DecisionRecord, binding: str, principal: dict[str, str]
) -> dict[str, Any]:
    requester = record.requester
    return {
        "correlation_id": record.correlation_id,
        "binding": binding,
        "authority": {"kind": record.authority_kind, "principal": principal},
        "requester": {
            "persona": str(requester.uuid),
            "name": requester.name,
            "class": requester.persona_class,
        },
        "operation": _card_value(record.operation),
        "boundary": record.boundary or None,
        "rule": record.rule,
        "reason": record.reason,
        "stamp_hash": record.stamp_hash,
        "actions": [{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Deny"}],
        "callback": {"url": settings.VIRGO_PUBLIC_BASE_URL + reverse("channel-decision")},
    }


def deliver_confirmation(record_id: int) -> Delivery | None:
    """Send one pending request to its authority; a delivered one is left alone."""
    record = (
        DecisionRecord.objects.select_related("requester", "authority_persona")
        .filter(pk=record_id)
        .first()
    )
    if record is None or record.decision != DecisionRecord.Decision.PENDING:
        return None
    if record.authority_kind == AuthorityKind.LEAD:
        notify_lead_inbox(record)
    delivery = _claim(record)
    if delivery.is_terminal or delivery.reason == "no_authority_surface":
        return delivery
    try:
        hub = ChannelClient.from_settings()
    except ChannelNotConfigured:
        return _record(delivery, Delivery.Status.FAILED, "channel_unconfigured")
    reply = hub.post(ROUTE, delivery.request, idempotency_key=record.correlation_id)
    attempts = delivery.attempts + reply.attempts
    if reply.outcome is Outcome.OK:
        return _record(
            delivery,
            Delivery.Status.APPLIED,
            "",
            attempts=attempts,
            message_id=str(reply.body.get("message_id") or ""),
            result={"status": "applied", "applied": True, "binding": delivery.binding},
        )
    if reply.outcome is Outcome.REJECTED:
        return _record(
            delivery,
            Delivery.Status.NOT_APPLIED,
            reply.reason,
            attempts=attempts,
            result={"status": "not_applied", "applied": False, "reason": reply.reason},
        )
    status = Delivery.Status.UNKNOWN if reply.outcome is Outcome.UNKNOWN else Delivery.Status.FAILED
    return _record(delivery, status, reply.reason, attempts=attempts)


def notify_lead_inbox(record: DecisionRecord) -> CoordinationMessage:
    """Tell the owning lead, in its inbox, what its deputy asks; once per request.

    The message comes from the requesting deputy (it is the deputy's request), with an envelope
    taken from the registry and the decision record, never from anything the deputy wrote.
    """
    lead = record.authority_persona
    assert lead is not None
    existing = CoordinationMessage.objects.filter(
        recipient=lead, envelope__confirmation__correlation_id=record.correlation_id
    ).first()
    if existing is not None:
        return existing
    requester = Persona.objects.select_related("agent", "address").get(pk=record.requester_id)
    address = requester.address
    operation = json.dumps(_card_value(record.operation), indent=2, sort_keys=True)
    return CoordinationMessage.objects.create(
        owner_id=requester.agent.owner_id,
        sender=requester,
        recipient=lead,
        subject=f"Confirmation requested: {record.tool_name}"[:200],
        body=(
            f"{requester.name} asks you to confirm {record.tool_name} ({record.reason}).\n"
            f"Correlation id: {record.correlation_id}\n"
            f"Approve or deny on the card at {PERSONA_MAILBOX}{lead.uuid} (virgo-channel).\n\n"
            f"Operation:\n{operation}"
        ),
        envelope={
            "sender": {
                "peer_id": str(requester.uuid),
                "agent_id": requester.agent_id,
                "address": address.path,
                "class": requester.persona_class,
                "workspace": address.workspace,
                "project": address.project,
            },
            "instance": {"generation": requester.generation, "stamp_hash": record.stamp_hash},
            "sent_at": timezone.now().isoformat(),
            "confirmation": {
                "correlation_id": record.correlation_id,
                "authority": {"kind": "persona", "id": str(lead.uuid)},
                "mailbox": f"{PERSONA_MAILBOX}{lead.uuid}",
            },
        },
    )


def _claim(record: DecisionRecord) -> Delivery:
    """The request's Delivery row: the one already sent (resent as is), or a new one."""
    existing = Delivery.objects.filter(kind=Delivery.Kind.CONFIRMATION, decision=record).first()
    if existing is not None and existing.status != Delivery.Status.FAILED:
        return existing
    # Nothing reached the hub yet (or never was sent): the request is built from what is routed
    # now, so an authority surface set in the meantime is used.
    try:
        binding, principal = authority_address(record)
    except Unroutable:
        binding, principal, request = "", None, {}
        reason = "no_authority_surface"
    else:
        request = confirmation_request(record, binding, principal)
        reason = ""
    fields = {
        "persona": record.requester,
        "tool_name": record.tool_name,
        "binding": binding,
        "route": ROUTE,
        "request": request,
        "request_digest": request_digest(ROUTE, request),
        "principal": principal,
        "status": Delivery.Status.FAILED if reason else Delivery.Status.PENDING,
        "reason": reason,
    }
    if existing is not None:
        for name, value in fields.items():
            setattr(existing, name, value)
        existing.save()
        return existing
    try:
        with transaction.atomic():
            return Delivery.objects.create(
                kind=Delivery.Kind.CONFIRMATION,
                correlation_id=record.correlation_id,
                decision=record,
                **fields,
            )
    except IntegrityError:
        return Delivery.objects.get(kind=Delivery.Kind.CONFIRMATION, decision=record)


def _record(delivery: Delivery, status: str, reason: str, **fields: Any) -> Delivery:
    delivery.status = status
    delivery.reason = reason
    for name, value in fields.items():
        setattr(delivery, name, value)
    if status in Delivery.TERMINAL:
        delivery.completed_at = timezone.now()
    delivery.save()
    return delivery


def redeliver_pending(*, older_than: timedelta, limit: int = 100) -> int:
    """Send again every pending request whose card has not reached the hub for sure."""
    cutoff = timezone.now() - older_than
    records = (
        DecisionRecord.objects.filter(
            decision=DecisionRecord.Decision.PENDING, created_at__lt=cutoff
        )
        .filter(Q(delivery__isnull=True) | Q(delivery__status__in=_RETRYABLE))
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    count = 0
    for record_id in records:
        deliver_confirmation(record_id)
        count += 1
    return count
