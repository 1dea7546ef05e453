"""Writes to the hub under a correlation id: recorded first, settled once, retried safely.

`deliver` is the discipline every human-surface write follows:

1. a Delivery row is claimed for (tool, correlation id) before anything is sent; the same id
   with a different request, or from another persona, is refused, never re-sent;
2. a recorded terminal outcome (applied, or not applied with a reason) is returned as it was,
   without asking the hub again;
3. otherwise the request goes to the hub with `Idempotency-Key: <correlation id>`; a 2xx or a
   4xx is terminal and recorded; no answer is `unknown`: recorded as such, reported as a
   failure that is not success, and retryable under the same id (the hub replays, never
   re-applies).
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.db import IntegrityError, transaction
from django.utils import timezone

from channel.client import ChannelClient, ChannelNotConfigured, HubReply, Outcome
from channel.models import Delivery
from runtime.tools.toolkit import ToolCall
from runtime.tools.workspace import WorkspaceError


class ChannelError(WorkspaceError):
    """A human-surface call that did not reach a terminal outcome; `details` join the result."""

    code = "channel_error"
    details: dict[str, Any] = {}


class OutcomeUnknown(ChannelError):
    code = "outcome_unknown"

    def __init__(self, reason: str, *, attempts: int) -> None:
        super().__init__(
            f"the hub gave no answer ({reason}) after {attempts} attempt(s); the request may or "
            "may not have been applied. Call again with the same correlation_id: it is never "
            "applied twice."
        )
        self.details = {"status": "unknown", "retryable": True, "hub_reason": reason}


class ChannelUnconfigured(ChannelError):
    code = "channel_unconfigured"

    def __init__(self) -> None:
        super().__init__("virgo-channel has no hub configured (VIRGO_CHANNEL_URL): nothing sent")
        self.details = {"status": "failed", "retryable": True}


class CredentialRefused(ChannelError):
    code = "channel_unauthorized"

    def __init__(self) -> None:
        super().__init__("the hub refused Virgo's credential: nothing was applied")
        self.details = {"status": "failed", "retryable": True}


class HubRejected(ChannelError):
    """A read the hub answered with a definitive refusal (a write records it as not applied)."""

    code = "hub_rejected"

    def __init__(self, reason: str) -> None:
        super().__init__(f"the hub refused the request: {reason}")
        self.details = {"status": "not_applied", "hub_reason": reason}


class CorrelationReused(ChannelError):
    code = "correlation_mismatch"


@dataclass(frozen=True, slots=True)
class Terminal:
    """A definitive outcome: applied or not, and what the persona is told."""

    applied: bool
    fields: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


Interpret = Callable[[HubReply], Terminal]


def client() -> ChannelClient:
    try:
        return ChannelClient.from_settings()
    except ChannelNotConfigured:
        raise ChannelUnconfigured() from None


def request_digest(route: str, body: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps({"route": route, "body": body})).hexdigest()


def terminal_result(binding: str, outcome: Terminal) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": "applied" if outcome.applied else "not_applied",
        "applied": outcome.applied,
        "binding": binding,
        **outcome.fields,
    }
    if not outcome.applied:
        result["reason"] = outcome.reason
    return result


def deliver(
    *,
    call: ToolCall,
    route: str,
    body: dict[str, Any],
    binding: str,
    interpret: Interpret,
    recorded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send one write of a tool call to the hub, at most once in effect. See the module doc.

    `recorded` is what the Delivery row keeps of the request when `body` carries bulk (a file's
    content); the digest is always of the full body.
    """
    hub = client()
    digest = request_digest(route, body)
    delivery = _claim(call, route, recorded if recorded is not None else body, digest, binding)
    if delivery.is_terminal:
        return delivery.result or {}
    reply = hub.post(route, body, idempotency_key=call.correlation_id)
    return settle(delivery, reply, interpret)


def _claim(
    call: ToolCall, route: str, request: dict[str, Any], digest: str, binding: str
) -> Delivery:
    try:
        with transaction.atomic():
            delivery, _ = Delivery.objects.get_or_create(
                kind=Delivery.Kind.TOOL,
                correlation_id=call.correlation_id,
                defaults={
                    "persona": call.persona,
                    "tool_name": call.tool.name,
                    "binding": binding,
                    "route": route,
                    "request": request,
                    "request_digest": digest,
                },
            )
    except IntegrityError:
        delivery = Delivery.objects.get(kind=Delivery.Kind.TOOL, correlation_id=call.correlation_id)
    if (
        delivery.persona_id != call.persona.pk
        or delivery.tool_name != call.tool.name
        or delivery.request_digest != digest
    ):
        raise CorrelationReused(
            f"correlation id {call.correlation_id} already carried a different request to the "
            "hub; use a new correlation id for a new request"
        )
    return delivery


def settle(delivery: Delivery, reply: HubReply, interpret: Interpret) -> dict[str, Any]:
    """Record what the hub said; a terminal outcome is recorded once and then returned as is."""
    attempts = delivery.attempts + reply.attempts
    if reply.outcome is Outcome.UNKNOWN:
        _update(delivery, status=Delivery.Status.UNKNOWN, reason=reply.reason, attempts=attempts)
        raise OutcomeUnknown(reply.reason, attempts=reply.attempts)
    if reply.outcome is Outcome.UNAUTHORIZED:
        _update(delivery, status=Delivery.Status.FAILED, reason=reply.reason, attempts=attempts)
        raise CredentialRefused()
    if reply.outcome is Outcome.REJECTED:
        outcome = Terminal(False, reason=reply.reason)
    else:
        outcome = interpret(reply)
    result = terminal_result(delivery.binding, outcome)
    settled = _update(
        delivery,
        status=Delivery.Status.APPLIED if outcome.applied else Delivery.Status.NOT_APPLIED,
        reason=outcome.reason,
        attempts=attempts,
        result=result,
        message_id=str(outcome.fields.get("message_id") or ""),
        completed_at=timezone.now(),
    )
    if not settled:
        # A concurrent call with the same id settled first: its record is the answer.
        delivery.refresh_from_db()
        return delivery.result or {}
    return result


def _update(delivery: Delivery, **fields: Any) -> bool:
    """Write an outcome unless the row is already terminal; say whether it was written."""
    updated = (
        Delivery.objects.filter(pk=delivery.pk)
        .exclude(status__in=Delivery.TERMINAL)
        .update(updated_at=timezone.now(), **fields)
    )
    return bool(updated)
