"""Listing a persona in the directory, or delisting it: always an explicit, audited choice.

It is not part of what a persona is (no generation opens for it), so it is its own operation: an
owner lists or delists their own personas, a moderator may delist any but list none.
"""

from django.core.exceptions import PermissionDenied
from django.db import transaction

from personas import audit
from personas.models import AuditEvent, Persona
from personas.services.validation import User


@transaction.atomic
def persona_set_discoverable(
    *, persona: Persona, actor: User, discoverable: bool, via: str
) -> Persona:
    """List or delist a persona in the directory: always an explicit, audited choice.

    An owner lists or delists their own personas. A moderator (superuser) may delist any
    persona but never lists one on an owner's behalf.
    """
    persona = (
        Persona.objects.select_for_update(of=("self",)).select_related("agent").get(pk=persona.pk)
    )
    is_owner = actor.is_authenticated and persona.agent.owner_id == actor.pk
    is_moderator = actor.is_authenticated and getattr(actor, "is_superuser", False)
    if not is_owner and not (is_moderator and not discoverable):
        raise PermissionDenied(
            "only the owner may list a persona; a moderator may only delist"
            if is_moderator
            else "only the persona's owner may change its discoverability"
        )
    if persona.discoverable == discoverable:
        return persona
    audit.record(
        AuditEvent.Kind.DISCOVERABILITY,
        actor=actor,
        persona=persona,
        agent=persona.agent,
        data={"from": persona.discoverable, "to": discoverable, "via": via},
    )
    persona.discoverable = discoverable
    persona.save(update_fields=["discoverable", "updated_at"])
    return persona
