"""The rules a write must pass before anything of it is saved; nothing here writes.

Well-formed string lists, an agent's grant of catalogue verbs, a persona's verb subset and queues
within that grant (SPEC-0009), its bindings to its owner's own surfaces (VX-SEC-5), its ask-first
verbs and its lead; and who may change an agent or its personas (its owner). Each raises
ValidationError naming the field, or PermissionDenied.
"""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError

from personas.catalogue import VERBS_BY_NAME, unknown_verbs
from personas.models import Agent, Persona, PersonaClass, RegisteredAddress
from personas.surfaces import binding_problem, unowned_bindings, unowned_message

User = AbstractBaseUser | AnonymousUser


def _require_string_list(field: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValidationError({field: ["must be a list of non-empty strings"]})
    duplicates = sorted({item for item in value if value.count(item) > 1})
    if duplicates:
        raise ValidationError({field: [f"duplicate values: {', '.join(duplicates)}"]})
    return list(value)


def validate_grant(verbs: object, queues: object) -> tuple[list[str], list[str]]:
    errors: dict[str, list[str]] = {}
    try:
        verbs = _require_string_list("granted_verbs", verbs)
        unknown = unknown_verbs(verbs)
        if unknown:
            errors["granted_verbs"] = [f"unknown verbs: {', '.join(unknown)}"]
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        queues = _require_string_list("granted_queues", queues)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    assert isinstance(verbs, list) and isinstance(queues, list)
    return verbs, queues


def validate_scope(agent: Agent, verb_subset: object, queues: object) -> None:
    """SPEC-0009: verb_subset and queues must each be a subset of the agent's vended grant."""
    errors: dict[str, list[str]] = {}
    for field, value, grant in (
        ("verb_subset", verb_subset, agent.granted_verbs),
        ("queues", queues, agent.granted_queues),
    ):
        try:
            values = _require_string_list(field, value)
        except ValidationError as exc:
            errors.update(exc.message_dict)
            continue
        outside = [item for item in values if item not in grant]
        if outside:
            errors[field] = [f"not in agent {agent.name!r}'s vended grant: {', '.join(outside)}"]
    if errors:
        raise ValidationError(errors)


def _validate_persona(persona: Persona, *, draft: bool = False) -> None:
    """`draft`: the owner has yet to write the system prompt (a persona made from an A2A card),
    so a blank one is not refused here; persona_draft and proposal_approve keep it from standing."""
    errors: dict[str, list[str]] = {}
    try:
        validate_scope(persona.agent, persona.verb_subset, persona.queues)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if not persona.name.strip():
        errors["name"] = ["must not be blank"]
    if not persona.system_prompt.strip() and not draft:
        errors["system_prompt"] = ["must be authored by the owner; it is never generated"]
    if persona.persona_class not in PersonaClass.values:
        errors["persona_class"] = [
            f"unknown class {persona.persona_class!r}; one of {', '.join(PersonaClass.values)}"
        ]
    try:
        _validate_bindings(persona)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if holder := _address_holder(persona):
        errors["address"] = [
            f"{persona.address.path} is the address of {holder.name!r} ({holder.uuid}); "
            "two personas of one owner never share an address: choose another address, "
            "or revoke that persona first"
        ]
    if "verb_subset" not in errors:
        try:
            _validate_ask_first(persona)
        except ValidationError as exc:
            errors.update(exc.message_dict)
    lead = persona.owning_lead
    if lead is not None:
        if lead.pk == persona.pk:
            errors["owning_lead"] = ["a persona cannot be its own lead"]
        elif lead.agent.owner_id != persona.agent.owner_id:
            errors["owning_lead"] = ["the owning lead must belong to the same owner"]
        elif lead.persona_class != PersonaClass.PROJECT_LEAD:
            errors["owning_lead"] = ["the owning lead must be a project-lead persona"]
    if errors:
        raise ValidationError(errors)


def _address_holder(persona: Persona) -> Persona | None:
    """VX-GRANT-5: the owner's other live persona at `persona`'s address, if any.

    Every message a persona sends names its address, and the owner's personas find each other by
    it, so an address two personas hold would speak for either. A revoked persona holds none.
    The address row stays locked until the write commits, so two writes racing for one address
    are decided one after the other (on PostgreSQL; SQLite has one writer at a time anyway).
    """
    if persona.address_id is None:
        return None
    list(RegisteredAddress.objects.select_for_update().filter(pk=persona.address_id).values("pk"))
    return (
        Persona.objects.filter(
            agent__owner_id=persona.agent.owner_id,
            address_id=persona.address_id,
            revoked_at__isnull=True,
        )
        .exclude(pk=persona.pk)
        .only("name", "uuid")
        .first()
    )


def _validate_bindings(persona: Persona) -> None:
    """VX-SEC-5: every binding names a surface of the persona's own owner, or a mailbox of one
    of the owner's personas; the surfaces stay locked until the write commits."""
    field = "human_surface_bindings"
    bindings = _require_string_list(field, persona.human_surface_bindings)
    malformed = list(filter(None, map(binding_problem, bindings)))
    if malformed:
        raise ValidationError({field: malformed})
    unowned = unowned_bindings(persona.agent.owner_id, bindings, lock=True)
    if unowned:
        raise ValidationError({field: [unowned_message(binding) for binding in unowned]})


def _validate_ask_first(persona: Persona) -> None:
    """The owner's "ask first" verbs: verbs of the persona's own subset that would otherwise be
    allowed (a verb crossing a global boundary always asks, so naming it would change nothing)."""
    field = "ask_first_verbs"
    verbs = _require_string_list(field, persona.ask_first_verbs)
    outside = [verb for verb in verbs if verb not in persona.verb_subset]
    if outside:
        raise ValidationError({field: [f"not in the persona's verb_subset: {', '.join(outside)}"]})
    boundaries = {verb: VERBS_BY_NAME[verb].boundary for verb in verbs if verb in VERBS_BY_NAME}
    always = [f"{verb} (boundary: {b.value})" for verb, b in boundaries.items() if b is not None]
    if always:
        raise ValidationError(
            {field: [f"these cross a global boundary and always ask: {', '.join(always)}"]}
        )


def _require_owner(actor: User, agent: Agent) -> None:
    if not actor.is_authenticated or agent.owner_id != actor.pk:
        raise PermissionDenied("only the agent's owner may change it or its personas")
