"""The installation's registry of canonical addresses, which moderators keep.

A persona's address is resolved to its registered row (resolve_address) before it is saved; a
moderator registers a new one (address_register). The one exception is the installation's first
persona, whose reserved `root/secretary` its owner registers (address_register_first). What a
well-formed address is belongs to personas.addresses.
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from personas.addresses import FIRST_PERSONA_ADDRESS, address_problem
from personas.models import Persona, RegisteredAddress
from personas.services.validation import User


def resolve_address(path: object) -> RegisteredAddress:
    problem = address_problem(path)
    if problem:
        raise ValidationError({"address": [problem]})
    try:
        return RegisteredAddress.objects.get(path=path)
    except RegisteredAddress.DoesNotExist:
        raise ValidationError({"address": [f"address {path!r} is not registered"]}) from None


@transaction.atomic
def address_register(*, actor: User, path: str) -> RegisteredAddress:
    """Register a canonical address. The registry is installation-wide: moderators keep it."""
    if not (actor.is_authenticated and getattr(actor, "is_superuser", False)):
        raise PermissionDenied("only moderators may register addresses")
    problem = address_problem(path)
    if problem:
        raise ValidationError({"path": [problem]})
    if RegisteredAddress.objects.filter(path=path).exists():
        raise ValidationError({"path": [f"address {path!r} is already registered"]})
    return RegisteredAddress.objects.create(path=path, registered_by=actor)


@transaction.atomic
def address_register_first(*, actor: User) -> RegisteredAddress:
    """Register root/secretary for the installation's first persona, which any owner may make:
    with no persona yet there is no moderator's registry to ask. Call it in the transaction that
    makes that persona, so a persona that is not made leaves no address behind."""
    if not actor.is_authenticated:
        raise PermissionDenied("only a signed-in owner may register the first persona's address")
    if Persona.objects.exists():
        raise PermissionDenied(
            f"{FIRST_PERSONA_ADDRESS} is registered by its owner only for an installation's first "
            "persona, and personas exist"
        )
    registered, _ = RegisteredAddress.objects.get_or_create(
        path=FIRST_PERSONA_ADDRESS, defaults={"registered_by": actor}
    )
    return registered
