"""The owner's identity chain, which every card of theirs names as its provider.

Changing it owes every persona of the owner a new settling, queued by name.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from personas.models import OrganizationDomain, OwnerIdentity, Persona
from personas.services.derivation import _identity_of
from personas.services.generations import SETTLE_PERSONA
from virgo.queueing import queue_after_commit

# What an owner writes of their identity; everything else in it is proven, never typed.
OWNER_FIELDS = frozenset({"display_name", "organization_domain"})


@transaction.atomic
def owner_identity_update(*, user: AbstractBaseUser, **fields: Any) -> OwnerIdentity:
    """Change what the owner may: their display name and which proven domain their cards name.

    The OIDC issuer and subject are not the owner's to write (virgo.oidc writes them from a
    verified ID token), and a domain is named only while proven for them (VX-ID-2, VX-ID-4).
    """
    unknown = set(fields) - OWNER_FIELDS
    if unknown:
        raise ValidationError({name: "not the owner's to write" for name in sorted(unknown)})
    domain = fields.get("organization_domain")
    if domain is not None:
        # Judged as stored, never as the caller's copy says: a copy read before an approval
        # would refuse it, one read before a lapse would let a lapsed domain through.
        domain = fields["organization_domain"] = OrganizationDomain.objects.get(pk=domain.pk)
    if domain is not None and not domain.may_be_named_by(user):
        raise ValidationError(
            {
                "organization_domain": (
                    f"{domain.domain} is not proven for you: publish its token, "
                    "or ask its owner to share it"
                )
            }
        )
    identity = _identity_of(user)
    for field, value in fields.items():
        setattr(identity, field, value)
    identity.full_clean()
    identity.save()
    for persona_id in Persona.objects.owned_by(user).values_list("pk", flat=True):
        queue_after_commit(SETTLE_PERSONA, persona_id)
    return identity
