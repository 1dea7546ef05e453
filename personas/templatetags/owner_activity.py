"""`{% recent_changes as events %}`: what the signed-in owner last did, from the audit trail, for
the admin's index (Django's own "Recent actions" reads the admin's log, which Virgo's writes,
made through personas.services, never fill)."""

from typing import Any

from django import template

from personas import audit
from personas.models import AuditEvent

register = template.Library()

SHOWN = 10


@register.simple_tag(takes_context=True)
def recent_changes(context: dict[str, Any]) -> list[dict[str, Any]]:
    user = context["request"].user
    if not user.is_authenticated:
        return []
    events = (
        AuditEvent.objects.filter(actor_id=user.pk)
        .select_related("persona")
        .order_by("-at", "-pk")[:SHOWN]
    )
    return [
        {
            "at": event.at,
            "summary": audit.describe(event.kind, event.data),
            "persona": event.persona,
        }
        for event in events
    ]
