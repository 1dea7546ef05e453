"""The owner's identity chain, which every card of theirs names as its provider.

Changing it owes every persona of the owner a new settling, queued by name.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from personas.models import OwnerIdentity, Persona
from personas.services.derivation import _identity_of
from personas.services.generations import SETTLE_PERSONA
from virgo.queueing import queue_after_commit


@transaction.atomic
def owner_identity_update(*, user: AbstractBaseUser, **fields: Any) -> OwnerIdentity:
    """Change the identity chain cards name as provider; every persona of the owner follows."""
    identity = _identity_of(user)
    for field, value in fields.items():
        setattr(identity, field, value)
    identity.full_clean()
    identity.save()
    for persona_id in Persona.objects.owned_by(user).values_list("pk", flat=True):
        queue_after_commit(SETTLE_PERSONA, persona_id)
    return identity
