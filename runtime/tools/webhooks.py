"""The deployer's webhook verbs: register a deployment/publication webhook, and trigger it.

Both cross a confirm boundary by definition (the catalogue gives register_webhook the
credential-or-permission-change boundary and trigger_webhook external publication), so the
handler runs them only after the persona's bound human authority approved the exact call, once,
under its correlation id. Nothing here asks again.

What a trigger is asked about, and keyed on, includes the URL its webhook name stands for when
it is called (`resolve`): the trigger POSTs to exactly that URL, so a webhook registered anew
after an approval, or after a learned choice, never receives what was approved for the old one.
A registered URL must lead to a public address, and the address is checked again when the
trigger connects (virgo.outbound): the POST goes to the checked address, Host and TLS name kept.

A trigger POSTs JSON with a timeout, never following redirects, with the correlation id as
`Idempotency-Key` and the registry-derived delivery envelope as the sender. Every attempt is
recorded: `delivered` (2xx), `rejected` (any other status) or `unknown` (timeout or connection
lost: the receiver may or may not have acted). The approved operation runs once; trying again is
a new call with a new correlation id, and so a new confirmation.
"""

from collections.abc import Mapping
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction

from personas.models import Persona
from runtime.models import DecisionRecord, Webhook, WebhookDelivery
from runtime.tools.coordination import delivery_envelope
from runtime.tools.params import Key, Object, Text, url
from runtime.tools.toolkit import Arguments, Missing, Refused, ToolCall, iso, takes
from virgo import outbound

_NAME = Text(
    "webhook",
    "The webhook's name, a lowercase slug (a-z, 0-9 and inner '-').",
    required=True,
    max_length=64,
    pattern="[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?",
    key=Key.TARGET,
)
PAYLOAD_MAX_BYTES = 64 * 1024


class DestinationRefused(Refused):
    """The webhook's URL leads, now, to an address Virgo does not send to: nothing was sent."""

    code = "destination_refused"


def _timeout() -> float:
    return settings.VIRGO_WEBHOOK_TIMEOUT_SECONDS


def webhook_json(webhook: Webhook) -> dict[str, Any]:
    return {
        "webhook": webhook.name,
        "id": str(webhook.uuid),
        "url": webhook.url,
        "registered_at": iso(webhook.created_at),
    }


@takes(
    _NAME,
    url(
        "url",
        "Where triggers are POSTed: http(s) to a public address, without credentials.",
        required=True,
        outbound=True,
    ),
)
def register_webhook(call: ToolCall, args: Arguments) -> dict[str, Any]:
    name, target = args["webhook"], args["url"]
    confirmation = DecisionRecord.objects.filter(correlation_id=call.correlation_id).first()
    with transaction.atomic():
        webhook, created = Webhook.objects.select_for_update().update_or_create(
            persona_id=call.persona.pk,
            name=name,
            defaults={"url": target, "registered_under": confirmation},
        )
    return {**webhook_json(webhook), "replaced": not created}


def destination_of(persona: Persona, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The URL the named webhook of this persona stands for right now (None: not registered)."""
    name = arguments.get("webhook")
    found = (
        Webhook.objects.filter(persona_id=persona.pk, name=name).values_list("url", flat=True)
        if isinstance(name, str)
        else Webhook.objects.none()
    )
    return {"url": found.first()}


@takes(
    _NAME,
    Object(
        "payload",
        "What the receiver gets as `payload`.",
        max_bytes=PAYLOAD_MAX_BYTES,
        key=Key.DIGEST,
    ),
    resolve=destination_of,
)
def trigger_webhook(call: ToolCall, args: Arguments) -> dict[str, Any]:
    name, payload = args["webhook"], args["payload"]
    # The URL this call was asked about and keyed on, never what the row says by now.
    target = call.op.resolved.get("url")
    webhook = Webhook.objects.filter(persona_id=call.persona.pk, name=name).first()
    if webhook is None or target is None:
        raise Missing(f"webhook {name!r} is not registered by this persona")
    body = {
        "webhook": name,
        "event": "trigger",
        "correlation_id": call.correlation_id,
        "sender": delivery_envelope(call),
        "payload": payload,
    }
    status_code, error = None, ""
    try:
        response = outbound.request(
            "POST",
            target,
            what=f"webhook {name!r}",
            json=body,
            timeout=_timeout(),
            headers={"Idempotency-Key": call.correlation_id, "User-Agent": "virgo-webhooks"},
        )
    except outbound.DestinationRefused as exc:
        raise DestinationRefused(f"nothing was sent: {exc}") from None
    except httpx.TimeoutException as exc:
        outcome, error = WebhookDelivery.Outcome.UNKNOWN, f"timed out: {exc}"
    except httpx.TransportError as exc:
        outcome, error = WebhookDelivery.Outcome.UNKNOWN, f"connection failed: {exc}"
    else:
        status_code = response.status_code
        outcome = (
            WebhookDelivery.Outcome.DELIVERED
            if response.is_success
            else WebhookDelivery.Outcome.REJECTED
        )
    delivery = WebhookDelivery.objects.create(
        webhook=webhook,
        url=target,
        correlation_id=call.correlation_id,
        payload=payload,
        outcome=outcome,
        status_code=status_code,
        error=error[:500],
    )
    return {
        "webhook": name,
        "outcome": delivery.outcome,
        "status_code": status_code,
        "error": delivery.error or None,
        "at": iso(delivery.at),
    }


IMPLEMENTATIONS = {
    "deploy.register_webhook": register_webhook,
    "deploy.trigger_webhook": trigger_webhook,
}
