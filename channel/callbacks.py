"""Answers to confirmation requests, as the hub relays them: checked, then decided.

The hub attests who pressed approve or deny (the principal). An answer decides a request only
when that principal is exactly the one the request was routed to; the decision is then taken by
runtime.confirmations.decide as the routed authority (the owner, or the owning lead persona),
which refuses a persona answering its own request whatever the hub says.

Each signed callback is acted on once (answer_once): its signature is recorded in the same
transaction as what it decides, so a copy replayed inside the tolerance window is refused, and
an answer that failed half-way (rolled back) may be sent again.
"""

import time
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from channel.models import AcceptedCallback, Delivery
from channel.signing import Signed
from runtime import confirmations
from runtime.models import AuthorityKind, DecisionRecord

_DECISIONS = {"approve": True, "deny": False}


@dataclass
class CallbackRefused(Exception):
    status: int
    code: str
    detail: str


def _principal(value: Any) -> dict[str, str]:
    if (
        not isinstance(value, dict)
        or set(value) != {"kind", "id"}
        or value["kind"] not in ("human", "persona")
        or not isinstance(value["id"], str)
        or not value["id"]
    ):
        raise CallbackRefused(400, "invalid_principal", "principal is {kind: human|persona, id}")
    return value


def answer_once(payload: Any, *, signed: Signed, tolerance: int) -> DecisionRecord:
    """answer_confirmation, for a callback whose signature has not been accepted before.

    A refusal consumes the signature too (the copy would only be refused again, or be let in
    later by a change it was never signed for); a crash does not, since nothing is committed.
    """
    with transaction.atomic():
        _accept(signed, tolerance=tolerance)
        try:
            return answer_confirmation(payload)
        except CallbackRefused as refused:
            refusal = refused
    raise refusal


def _accept(signed: Signed, *, tolerance: int) -> None:
    # Whatever was signed before the window can never verify again: no need to remember it.
    AcceptedCallback.objects.filter(signed_at__lt=int(time.time()) - tolerance).delete()
    try:
        # A savepoint: the enclosing transaction stays usable for the refusal.
        with transaction.atomic():
            AcceptedCallback.objects.create(digest=signed.digest, signed_at=signed.timestamp)
    except IntegrityError:
        raise CallbackRefused(
            409, "replayed", "this signed callback was already received; sign a new one"
        ) from None


def answer_confirmation(payload: Any) -> DecisionRecord:
    """Decide the request `payload` answers, as its routed authority, or say why not."""
    if not isinstance(payload, dict):
        raise CallbackRefused(400, "invalid_body", "the body is a JSON object")
    correlation_id = payload.get("correlation_id")
    decision = payload.get("decision")
    if not isinstance(correlation_id, str) or decision not in _DECISIONS:
        raise CallbackRefused(
            400, "invalid_body", "correlation_id and decision (approve|deny) are required"
        )
    principal = _principal(payload.get("principal"))
    record = (
        DecisionRecord.objects.select_related("requester", "authority_user", "authority_persona")
        .filter(correlation_id=correlation_id)
        .first()
    )
    if record is None:
        raise CallbackRefused(404, "unknown_request", "no confirmation request has this id")
    if principal == {"kind": "persona", "id": str(record.requester.uuid)}:
        raise CallbackRefused(403, "own_request", "a persona cannot confirm its own request")
    delivery = Delivery.objects.filter(kind=Delivery.Kind.CONFIRMATION, decision=record).first()
    if delivery is None or delivery.principal is None:
        raise CallbackRefused(409, "not_routed", "this request was never sent through the hub")
    if principal != delivery.principal:
        raise CallbackRefused(
            403, "wrong_principal", "only the authority the request was routed to may answer it"
        )
    approve = _DECISIONS[decision]
    if record.decision != DecisionRecord.Decision.PENDING:
        expected = DecisionRecord.Decision.APPROVED if approve else DecisionRecord.Decision.DENIED
        if record.decision == expected:
            return record
        raise CallbackRefused(409, "already_decided", f"the request is already {record.decision}")
    authority: dict[str, Any] = (
        {"user": record.authority_user}
        if record.authority_kind == AuthorityKind.HUMAN
        else {"persona": record.authority_persona}
    )
    try:
        return confirmations.decide(record=record, approve=approve, **authority)
    except PermissionDenied as exc:
        raise CallbackRefused(403, "not_the_authority", str(exc)) from None
    except ValidationError:
        raise CallbackRefused(409, "already_decided", "the request was decided meanwhile") from None
