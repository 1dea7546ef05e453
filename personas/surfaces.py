"""Human surfaces: the places on the hub an owner's personas may be bound to.

A persona's binding names either a surface registered to the persona's owner (HumanSurface) or
the mailbox `virgo:persona/<uuid>` of one of that owner's own personas. Anything else (another
owner's surface or persona mailbox, an id nobody registered) is refused, naming the value: by
personas.services when a persona is written, by the stamp factory when a generation is built, and
by the human-surface tools when they are called.

The hub does not tell Virgo who owns a place, so registering one is a claim: the first owner to
register a binding holds it, and while they do nobody else can register or bind it.
"""

import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from personas.models import HumanSurface, Persona

PERSONA_MAILBOX = "virgo:persona/"
# Ids under this prefix are Virgo's own (persona mailboxes): bound directly, never registered.
RESERVED_PREFIX = "virgo:"
LABEL_MAX = 200
# Printable ASCII without spaces: what the hub's ids are made of, and no look-alike spellings.
_BINDING = re.compile(r"[!-~]{1,200}")
# The same characters, as the API's schema states them (its maxLength says 200).
BINDING_SHAPE = r"^[!-~]+$"


def binding_problem(binding: object) -> str | None:
    """Why `binding` cannot be a hub binding at all, or None."""
    if not isinstance(binding, str) or not _BINDING.fullmatch(binding):
        return f"{binding!r} is not a hub binding: 1-200 printable ASCII characters, no spaces"
    return None


def canonical_uuid(value: object) -> str | None:
    """`value` if it is a uuid in its one canonical spelling (lowercase, hyphenated), else None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    return value if str(parsed) == value else None


def mailbox_persona(binding: str) -> str | None:
    """The persona uuid a mailbox binding names, in its one canonical spelling; else None."""
    if not binding.startswith(PERSONA_MAILBOX):
        return None
    return canonical_uuid(binding.removeprefix(PERSONA_MAILBOX))


def binding_owners(bindings: Iterable[str], *, lock: bool = False) -> dict[str, Any]:
    """The owner id of each binding that names a registered surface or an existing persona's
    mailbox; a binding nobody holds is left out.

    Two queries at most, whatever the number of bindings. `lock` holds the matching surface rows
    until the transaction ends, so a surface cannot be removed while a persona is bound to it.
    """
    every = {binding for binding in bindings if isinstance(binding, str)}
    reserved = {binding for binding in every if binding.startswith(RESERVED_PREFIX)}
    owners: dict[str, Any] = {}
    if every - reserved:
        surfaces = HumanSurface.objects.filter(binding__in=every - reserved)
        if lock:
            surfaces = surfaces.select_for_update()
        owners.update(surfaces.values_list("binding", "owner_id"))
    mailboxes = {binding: mailbox_persona(binding) for binding in reserved}
    named = {persona for persona in mailboxes.values() if persona}
    if named:
        persona_owners = {
            str(persona_uuid): owner
            for persona_uuid, owner in Persona.objects.filter(uuid__in=named).values_list(
                "uuid", "agent__owner_id"
            )
        }
        for binding, persona in mailboxes.items():
            if persona in persona_owners:
                owners[binding] = persona_owners[persona]
    return owners


def unowned_bindings(owner_id: Any, bindings: Iterable[str], *, lock: bool = False) -> list[str]:
    """Those of `bindings` that name no surface of the owner, in their order."""
    bindings = list(bindings)
    owners = binding_owners(bindings, lock=lock)
    return [binding for binding in bindings if owners.get(binding) != owner_id]


def owned_surface(owner_id: Any, binding: object) -> HumanSurface | None:
    """The owner's registered surface spelled exactly `binding`, if there is one."""
    if not isinstance(binding, str):
        return None
    return HumanSurface.objects.filter(owner_id=owner_id, binding=binding).first()


def unowned_message(binding: str) -> str:
    """Why an owner may not bind `binding`, in the words the owner reads."""
    if binding.startswith(RESERVED_PREFIX):
        return (
            f"{binding!r} is not the mailbox of one of your personas "
            f"({PERSONA_MAILBOX}<uuid>, the uuid written in lowercase)"
        )
    return (
        f"{binding!r} is not one of your human surfaces: register it first (admin: Human "
        "surfaces; API: /api/surfaces/)"
    )


# Writes -------------------------------------------------------------------------------------


def _require_self(owner: Any, actor: Any) -> None:
    if not (actor.is_authenticated and actor.is_active and actor.pk == owner.pk):
        raise PermissionDenied("only the owner registers or removes their own human surfaces")


@transaction.atomic
def surface_register(
    *, owner: Any, actor: Any, binding: object, label: object = ""
) -> HumanSurface:
    """Claim a place on the hub for `owner`: from now on only their personas may be bound to it."""
    _require_self(owner, actor)
    errors: dict[str, list[str]] = {}
    problem = binding_problem(binding)
    if problem:
        errors["binding"] = [problem]
    elif isinstance(binding, str) and binding.startswith(RESERVED_PREFIX):
        errors["binding"] = [
            f"{binding!r}: ids starting with {RESERVED_PREFIX!r} are Virgo's own; a persona "
            "mailbox is bound directly and never registered"
        ]
    if not isinstance(label, str) or len(label) > LABEL_MAX or "\x00" in label:
        errors["label"] = [f"must be text of at most {LABEL_MAX} characters"]
    if errors:
        raise ValidationError(errors)
    assert isinstance(binding, str) and isinstance(label, str)
    taken = HumanSurface.objects.filter(binding__iexact=binding).first()
    if taken is None:
        try:
            with transaction.atomic():
                return HumanSurface.objects.create(owner=owner, binding=binding, label=label)
        except IntegrityError:
            # Registered by a concurrent request between the check and the insert.
            taken = HumanSurface.objects.filter(binding__iexact=binding).first()
    if taken is not None and taken.owner_id == owner.pk:
        message = f"{binding!r} is already one of your human surfaces (as {taken.binding!r})"
    else:
        message = f"{binding!r} is registered to another owner; a surface belongs to one owner"
    raise ValidationError({"binding": [message]})


def personas_bound_to(surface: HumanSurface) -> list[str]:
    """The names of the owner's personas bound to the surface (only they can be)."""
    return [
        name
        for name, bindings in Persona.objects.filter(agent__owner_id=surface.owner_id)
        .order_by("name")
        .values_list("name", "human_surface_bindings")
        if surface.binding in bindings
    ]


@transaction.atomic
def surface_remove(*, surface: HumanSurface, actor: Any) -> None:
    """Give a place up. Refused while a persona is bound to it: unbind the persona first."""
    surface = HumanSurface.objects.select_for_update().select_related("owner").get(pk=surface.pk)
    _require_self(surface.owner, actor)
    bound = personas_bound_to(surface)
    if bound:
        raise ValidationError(
            {"binding": [f"{surface.binding!r} is bound to {', '.join(bound)}: unbind it first"]}
        )
    surface.delete()
