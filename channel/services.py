"""Writes of virgo-channel's owner-facing settings."""

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from channel.models import AuthoritySurface
from personas.surfaces import owned_surface


@transaction.atomic
def authority_surface_set(
    *, user: Any, actor: Any, binding: str, principal: str
) -> AuthoritySurface:
    """Say where `user` takes confirmation requests on the hub and as whom they answer.

    Only the user themself may set it: it decides who can approve their personas' requests.
    The binding must be one of the user's registered human surfaces, so confirmation cards never
    go to a place another owner holds.
    """
    if not (actor.is_authenticated and actor.is_active and actor.pk == user.pk):
        raise PermissionDenied("only the owner may set where their confirmations go")
    errors = {
        name: ["must be a non-empty string of at most 200 characters"]
        for name, value in (("binding", binding), ("principal", principal))
        if not isinstance(value, str) or not value.strip() or len(value) > 200
    }
    if errors:
        raise ValidationError(errors)
    if owned_surface(user.pk, binding.strip()) is None:
        raise ValidationError(
            {
                "binding": [
                    f"{binding.strip()!r} is not one of your human surfaces: register it first "
                    "(admin: Human surfaces; API: /api/surfaces/)"
                ]
            }
        )
    surface, _ = AuthoritySurface.objects.update_or_create(
        user=user, defaults={"binding": binding.strip(), "principal": principal.strip()}
    )
    return surface
