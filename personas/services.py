"""Every write to owners' agents and personas, one function per operation.

The admin, the API, the CLI and Celery tasks all call these; none writes the models directly.
Each function validates before it saves, runs in one transaction, and queues follow-up work
with transaction.on_commit so a task never sees uncommitted state.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from personas.addresses import address_problem
from personas.catalogue import VERBS_BY_NAME, unknown_verbs
from personas.models import (
    Agent,
    AuditEvent,
    Generation,
    GrantProposal,
    OwnerIdentity,
    Persona,
    PersonaClass,
    RegisteredAddress,
    RevocationReason,
    Skill,
    SkillMapRevision,
)
from personas.signals import persona_revoked, personas_written
from personas.surfaces import binding_problem, unowned_bindings, unowned_message
from virgo.bulk import update_each
from virgo.canonical import canonical_bytes, sha256_hex
from virgo.queueing import queue_after_commit

User = AbstractBaseUser | AnonymousUser

# The work a change owes, queued by the name its task is registered under (the broker's
# contract): the settling app does it, and the records never import who does.
SETTLE_PERSONA = "personas.tasks.settle_persona"
FAN_OUT_SKILL_MAP = "personas.tasks.fan_out_skill_map"

# What an owner authors of a persona, each editable through persona_update (discoverability is
# its own, audited operation).
PERSONA_FIELDS = (
    "name",
    "description",
    "system_prompt",
    "verb_subset",
    "queues",
    "persona_class",
    "address",
    "graph_namespace",
    "human_surface_bindings",
    "owning_lead",
    "ask_first_verbs",
)


# Derivation -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillMap:
    revision: int
    skills: Sequence[Skill]


def derive_skills(verb_subset: Iterable[str], skill_map: Iterable[Skill]) -> list[Skill]:
    """The skills whose required verbs are all in the subset (SPEC-0009 derived skills).

    A skill that requires no verbs would be advertised without any capability behind it, so
    it is never derived.
    """
    verbs = set(verb_subset)
    return [
        skill for skill in skill_map if skill.required_verbs and set(skill.required_verbs) <= verbs
    ]


def skill_map_revision() -> int:
    return SkillMapRevision.objects.values_list("revision", flat=True).first() or 0


def current_skill_map() -> SkillMap:
    # The revision is read before the skills: a map change committing in between leaves the
    # persona one revision behind (so it is recomputed again), never current with stale skills.
    revision = skill_map_revision()
    return SkillMap(revision, list(Skill.objects.order_by("slug")))


def composition_of(persona: Persona) -> dict[str, Any]:
    """Everything a persona is, as I-JSON: the input of its card and of its stamp.

    `ask_first_verbs` is there only when the owner set some, so the composition of a persona
    made before they existed is unchanged and opens no generation of its own.
    """
    identity = _identity_of(persona.agent.owner)
    composition = {
        "persona": str(persona.uuid),
        "agent": persona.agent_id,
        "name": persona.name,
        "description": persona.description,
        "system_prompt_sha256": sha256_hex(persona.system_prompt.encode()),
        "verb_subset": sorted(persona.verb_subset),
        "queues": sorted(persona.queues),
        "skills": list(persona.skills),
        "persona_class": persona.persona_class,
        "address": persona.address.path,
        "graph_namespace": persona.effective_graph_namespace,
        "human_surface_bindings": sorted(persona.human_surface_bindings),
        "owning_lead": str(persona.owning_lead.uuid) if persona.owning_lead else None,
        "provider": {
            "organization": identity.provider_organization,
            "url": identity.provider_url,
        },
    }
    if persona.ask_first_verbs:
        composition["ask_first_verbs"] = sorted(persona.ask_first_verbs)
    return composition


def composition_hash(composition: dict[str, Any]) -> str:
    """SHA-256 of the composition's RFC 8785 bytes (the C encoder where that is byte-identical)."""
    return sha256_hex(canonical_bytes(composition))


def _identity_of(user: Any) -> OwnerIdentity:
    try:
        return user.identity
    except OwnerIdentity.DoesNotExist:
        return OwnerIdentity(user=user, display_name=user.get_full_name() or user.get_username())


# Validation -----------------------------------------------------------------------------------


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


def _require_owner(actor: User, agent: Agent) -> None:
    if not actor.is_authenticated or agent.owner_id != actor.pk:
        raise PermissionDenied("only the agent's owner may change it or its personas")


# Generations ----------------------------------------------------------------------------------


def _settle_generation(persona: Persona, skill_map: SkillMap, *, by_owner: bool = False) -> bool:
    """Derive the persona's skills and, when what it is changed, open its next generation.

    Runs inside the caller's transaction with the persona row locked. Returns whether a new
    generation was opened (its stamp is then owed and its card must be rendered). `by_owner`:
    the owner's own edit, the only change that may follow a revoked generation.
    """
    current = persona.generations.filter(number=persona.generation).first()
    generation = _next_generation(persona, skill_map, current, by_owner=by_owner)
    if generation is None:
        return False
    generation.save()
    return True


def _next_generation(
    persona: Persona, skill_map: SkillMap, current: Generation | None, *, by_owner: bool = False
) -> Generation | None:
    """Derive the persona's skills; the unsaved next generation if what it is changed, else None.

    `current` is the persona's generation numbered `persona.generation`, or None for a new one.
    After a revoked generation only the owner's own edit opens the next one (VX-TRUST-5): a
    recompute, a narrowed grant or a new identity chain never brings a revoked persona back.
    """
    persona.skill_map_revision = skill_map.revision
    derived = derive_skills(persona.verb_subset, skill_map.skills)
    persona.skills = [skill.card_entry() for skill in derived]
    composition = composition_of(persona)
    if current is not None and current.composition == composition:
        return None
    if persona.is_revoked or (current is not None and current.is_revoked and not by_owner):
        return None
    if current is not None:
        persona.generation += 1
    persona.standing = None
    return Generation(
        persona=persona,
        number=persona.generation,
        composition=composition,
        base_composition_hash=composition_hash(composition),
    )


def _queue_settle(persona: Persona) -> None:
    queue_after_commit(SETTLE_PERSONA, persona.pk)


# Agents ---------------------------------------------------------------------------------------


@transaction.atomic
def agent_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    granted_verbs: list[str],
    granted_queues: list[str],
    self_description: str = "",
) -> Agent:
    verbs, queues = validate_grant(granted_verbs, granted_queues)
    agent = Agent(
        owner=owner,
        name=name,
        self_description=self_description,
        granted_verbs=verbs,
        granted_queues=queues,
    )
    agent.full_clean()
    agent.save()
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, actor: User, **changes: Any) -> Agent:
    """Update an agent; narrowing its grant narrows its personas in the same transaction."""
    _require_owner(actor, agent)
    allowed = {"name", "self_description", "granted_verbs", "granted_queues"}
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise ValidationError({field: ["not an agent field"] for field in unknown})
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    for field, value in changes.items():
        setattr(agent, field, value)
    agent.granted_verbs, agent.granted_queues = validate_grant(
        agent.granted_verbs, agent.granted_queues
    )
    agent.full_clean()
    agent.save()
    _narrow_personas(agent, actor)
    return agent


def _narrow_personas(agent: Agent, actor: User) -> None:
    skill_map = current_skill_map()
    personas = agent.personas.select_for_update(of=("self",)).select_related(
        "address", "agent__owner"
    )
    for persona in personas:
        dropped_verbs = [v for v in persona.verb_subset if v not in agent.granted_verbs]
        dropped_queues = [q for q in persona.queues if q not in agent.granted_queues]
        if not dropped_verbs and not dropped_queues:
            continue
        persona.agent = agent
        persona.verb_subset = [v for v in persona.verb_subset if v in agent.granted_verbs]
        persona.ask_first_verbs = [v for v in persona.ask_first_verbs if v in agent.granted_verbs]
        persona.queues = [q for q in persona.queues if q in agent.granted_queues]
        if _settle_generation(persona, skill_map):
            _supersede_proposals(persona)
        persona.save()
        AuditEvent.objects.create(
            kind=AuditEvent.Kind.GRANT_NARROWED,
            actor=actor if actor.is_authenticated else None,
            agent=agent,
            persona=persona,
            data={
                "removed_verbs": dropped_verbs,
                "removed_queues": dropped_queues,
                "generation": persona.generation,
            },
        )
        _queue_settle(persona)


@transaction.atomic
def agent_delete(*, agent: Agent, actor: User) -> None:
    _require_owner(actor, agent)
    agent.delete()


# Personas -------------------------------------------------------------------------------------


def _apply_persona_changes(persona: Persona, changes: dict[str, Any]) -> None:
    unknown = sorted(set(changes) - set(PERSONA_FIELDS))
    if unknown:
        raise ValidationError({field: ["not an editable persona field"] for field in unknown})
    for field, value in changes.items():
        if field == "address" and not isinstance(value, RegisteredAddress):
            value = resolve_address(value)
        setattr(persona, field, value)


@transaction.atomic
def persona_create(*, agent: Agent, actor: User, **fields: Any) -> Persona:
    """Create a persona standing at once (once stamped): the owner's own setup, such as `make
    run`'s demo data. Every channel (the API, the CLI, an import) calls persona_draft, which holds
    the grant for the owner's approval. It is not discoverable until its owner lists it."""
    _require_owner(actor, agent)
    missing = [f for f in ("name", "system_prompt", "persona_class", "address") if f not in fields]
    if missing:
        raise ValidationError({field: ["this field is required"] for field in missing})
    persona = Persona(agent=agent)
    _apply_persona_changes(persona, fields)
    _validate_persona(persona)
    persona.save()
    _settle_generation(persona, current_skill_map())
    persona.save()
    _queue_settle(persona)
    return persona


class StaleProposal(ValidationError):
    """What a proposal would make is no longer what its owner was shown."""


@dataclass(frozen=True, slots=True)
class PersonaChange:
    """What became of a submitted change: made at once, or held as a proposal for the owner."""

    persona: Persona
    proposal: GrantProposal | None = None


def _locked_persona(persona: Persona) -> Persona:
    return (
        Persona.objects.select_for_update(of=("self",))
        .select_related("agent__owner", "address", "owning_lead")
        .get(pk=persona.pk)
    )


def _prepare_change(
    persona: Persona, actor: User, changes: dict[str, Any], *, draft: bool = False
) -> tuple[Persona, Generation | None, Generation | None, dict[str, Any] | None]:
    """Lock the persona, apply and validate `changes` in memory; the current generation, the
    unsaved next one (None when what the persona is does not change) and the grant diff between
    them. A change that would leave the persona unable to stand is refused here, naming the
    field (VX-GRANT-4). Nothing is written."""
    _require_owner(actor, persona.agent)
    persona = _locked_persona(persona)
    if persona.is_revoked:
        raise ValidationError({"persona": [_revoked_message(persona)]})
    current = persona.generations.filter(number=persona.generation).first()
    _apply_persona_changes(persona, changes)
    _validate_persona(persona, draft=draft)
    # Every change here is the owner's (_require_owner): the one kind that may follow a revoked
    # generation with a new one.
    next_generation = _next_generation(persona, current_skill_map(), current, by_owner=True)
    if next_generation is None:
        return persona, current, None, None
    diff = grant_diff(current=current, proposed=next_generation)
    _refuse_what_would_not_stand(diff)
    return persona, current, next_generation, diff


def _refuse_what_would_not_stand(diff: dict[str, Any]) -> None:
    if diff["refuses"]:
        raise ValidationError(
            {
                field: [f"the persona would not stand: {reason}" for reason in reasons]
                for field, reasons in diff["refuses"].items()
            }
        )


def _commit_change(persona: Persona, proposed: Generation | None) -> None:
    if proposed is not None:
        proposed.save()
        _queue_settle(persona)
        _supersede_proposals(persona)
    persona.save()


def _supersede_proposals(persona: Persona) -> None:
    """A new generation makes every pending proposal of the persona stale: each was made
    against the generation before, and its diff no longer says what approving would do."""
    GrantProposal.objects.filter(persona=persona, status=GrantProposal.Status.PENDING).update(
        status=GrantProposal.Status.STALE
    )


@transaction.atomic
def persona_update(
    *,
    persona: Persona,
    actor: User,
    expect_composition_hash: str | None = None,
    as_drafted: bool = False,
    **changes: Any,
) -> Persona:
    """Change what a persona is, at once: the owner's own confirmed change, and what approving
    a proposal does. Invalid input raises before anything is written.

    Channels that are not the owner's confirmed edit call persona_submit, which holds a change
    that widens the grant as a proposal. `expect_composition_hash` (an approval) refuses, as
    StaleProposal, a change whose next composition is not the one the owner reviewed;
    `as_drafted` compares it as it was proposed, with the draft's blank system prompt in place of
    the one the owner writes as they approve.
    """
    persona, _, proposed, _ = _prepare_change(persona, actor, changes)
    if expect_composition_hash is not None and (
        proposed is None or _as_proposed(proposed, as_drafted) != expect_composition_hash
    ):
        raise StaleProposal(
            {"proposal": ["stale: what it would make is no longer what it showed; propose again"]}
        )
    _commit_change(persona, proposed)
    return persona


def _as_proposed(proposed: Generation, as_drafted: bool) -> str:
    if not as_drafted:
        return proposed.base_composition_hash
    return composition_hash({**proposed.composition, "system_prompt_sha256": sha256_hex(b"")})


def _revoked_message(persona: Persona) -> str:
    assert persona.revoked_at is not None
    return (
        f"persona {persona.uuid} was revoked at {persona.revoked_at.isoformat()} "
        f"({persona.revocation_reason}); a revoked persona never changes again: create a new one"
    )


def grant_diff(*, current: Generation | None, proposed: Generation) -> dict[str, Any]:
    """The grant diff from the current generation to the unsaved `proposed` one, computed by the
    app that owns the stamp rules (settings.VIRGO_GRANT_DIFF names its function); it says,
    under `widens`, whether the change adds what the persona may do."""
    diff: dict[str, Any] = import_string(settings.VIRGO_GRANT_DIFF)(
        current=current, proposed=proposed
    )
    return diff


@transaction.atomic
def persona_submit(
    *, persona: Persona, actor: User, via: GrantProposal.Via, **changes: Any
) -> PersonaChange:
    """A change through a channel that is not the owner's edit confirmed on the diff page: an
    API write (token or session), a CLI write, an import, the admin's save before review.

    A change that only narrows or keeps the grant (removes tools, verbs, queues, bindings;
    `allow` to `confirm`; a graph namespace below the current one; no grant field at all) is
    made at once, as persona_update makes it. One that widens it (every kind stamps.grant
    names: a tool, `confirm` to `allow`, a lifted condition, a queue, binding or writable path,
    a graph namespace above or beside, confirmations moved to a persona) is held whole as a
    pending GrantProposal: nothing that runs or is advertised changes until the owner approves
    it (proposal_approve).
    """
    persona, current, proposed, diff = _prepare_change(persona, actor, changes)
    if proposed is not None and current is not None and diff is not None and diff["widens"]:
        return _propose(persona, actor, via, changes, current, proposed, diff)
    _commit_change(persona, proposed)
    return PersonaChange(persona)


def _propose(
    persona: Persona,
    actor: User,
    via: GrantProposal.Via,
    changes: dict[str, Any],
    current: Generation,
    proposed: Generation,
    diff: dict[str, Any],
) -> PersonaChange:
    proposal = GrantProposal.objects.create(
        persona_id=persona.pk,
        via=via,
        changes=_stored_changes(changes),
        base_generation=current.number,
        next_composition_hash=proposed.base_composition_hash,
        diff=diff,
        proposed_by=actor if actor.is_authenticated else None,
    )
    return PersonaChange(Persona.objects.get(pk=persona.pk), proposal)


# What a persona may do, beside what it is: a creation through a channel holds these for the owner.
GRANT_FIELDS = ("verb_subset", "queues", "human_surface_bindings", "ask_first_verbs")


@transaction.atomic
def persona_draft(
    *,
    agent: Agent,
    actor: User,
    via: GrantProposal.Via,
    without_prompt: bool = False,
    **fields: Any,
) -> PersonaChange:
    """Create a persona through a channel that is not the owner's own setup: an API write (token
    or session), `virgo persona add`, a snapshot import, an A2A card import.

    The persona is made granting nothing (its grant fields empty), so its first generation does
    not stand: nothing of it runs or is advertised. Its grant (GRANT_FIELDS) is held as a pending
    GrantProposal the owner approves (proposal_approve). A persona that would not stand even with
    its grant is refused, naming the field, with nothing written (VX-GRANT-4).

    `without_prompt`: a draft (one made from an A2A card, which has no prompt): the owner writes
    the prompt as they approve.
    """
    _require_owner(actor, agent)
    if without_prompt and "system_prompt" in fields:
        raise ValidationError({"system_prompt": ["a draft starts without it"]})
    required = ("name", "persona_class", "address", *(() if without_prompt else ("system_prompt",)))
    missing = [f for f in required if f not in fields]
    if missing:
        raise ValidationError({field: ["this field is required"] for field in missing})
    whole = Persona(agent=agent)
    _apply_persona_changes(whole, {"system_prompt": "", **fields})
    _validate_persona(whole, draft=without_prompt)
    probe = _next_generation(whole, current_skill_map(), None)
    assert probe is not None
    probe_diff = grant_diff(current=None, proposed=probe)
    _refuse_what_would_not_stand(probe_diff)
    if not without_prompt and not probe_diff["widens"]:
        return PersonaChange(persona_create(agent=agent, actor=actor, **fields))
    grant = {field: fields.pop(field) for field in GRANT_FIELDS if field in fields}
    persona = Persona(agent=agent)
    empty: dict[str, Any] = {field: [] for field in GRANT_FIELDS}
    _apply_persona_changes(persona, {**fields, "system_prompt": whole.system_prompt, **empty})
    _validate_persona(persona, draft=without_prompt)
    persona.save()
    _settle_generation(persona, current_skill_map())
    persona.save()
    _queue_settle(persona)
    persona, current, proposed, diff = _prepare_change(persona, actor, grant, draft=without_prompt)
    if diff is None or proposed is None or current is None or not diff["widens"]:
        problems = "; ".join(diff["next_problems"]) if diff else "it changes nothing"
        raise ValidationError({"verb_subset": [f"would not make the persona stand: {problems}"]})
    return _propose(persona, actor, via, grant, current, proposed, diff)


def _stored_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """The changes as JSON: the address by its path, the owning lead by its UUID."""
    stored = dict(changes)
    if isinstance(stored.get("address"), RegisteredAddress):
        stored["address"] = stored["address"].path
    if "owning_lead" in stored:
        lead = stored["owning_lead"]
        stored["owning_lead"] = str(lead.uuid) if isinstance(lead, Persona) else lead
    return stored


def _loaded_changes(proposal: GrantProposal) -> dict[str, Any]:
    changes = dict(proposal.changes)
    if changes.get("owning_lead"):
        lead = Persona.objects.filter(uuid=changes["owning_lead"]).first()
        if lead is None:
            raise StaleProposal({"proposal": ["stale: its owning lead no longer exists"]})
        changes["owning_lead"] = lead
    return changes


def _require_decider(actor: User, proposal: GrantProposal) -> None:
    if not actor.is_authenticated or proposal.persona.agent.owner_id != actor.pk:
        raise PermissionDenied("only the persona's owner may decide its proposals")


def _pending(proposal: GrantProposal, actor: User) -> GrantProposal:
    proposal = (
        GrantProposal.objects.select_for_update(of=("self",))
        .select_related("persona__agent")
        .get(pk=proposal.pk)
    )
    _require_decider(actor, proposal)
    if proposal.status == GrantProposal.Status.STALE:
        raise StaleProposal(
            {"proposal": ["stale: the persona changed after it was proposed; propose again"]}
        )
    if proposal.status != GrantProposal.Status.PENDING:
        raise ValidationError(
            {"proposal": [f"already {proposal.status}: only a pending proposal can be decided"]}
        )
    return proposal


def proposal_approve(
    *, proposal: GrantProposal, actor: User, system_prompt: str | None = None
) -> Persona:
    """The owner approves: the change is made by persona_update, exactly as an immediate change
    would be. A proposal the persona has moved on from (a later generation, or a next
    composition other than the one it showed) is marked stale and refused.

    A draft's proposal (persona_draft) is approved with the system prompt its owner writes now,
    never generated: without one it is refused and stays pending."""
    try:
        with transaction.atomic():
            proposal = _pending(proposal, actor)
            persona = _locked_persona(proposal.persona)
            if persona.generation != proposal.base_generation:
                raise StaleProposal(
                    {
                        "proposal": [
                            f"stale: made against generation {proposal.base_generation}, and the "
                            f"persona is at generation {persona.generation}; propose again"
                        ]
                    }
                )
            changes = _loaded_changes(proposal)
            drafted = not persona.system_prompt.strip()
            if drafted:
                if not (system_prompt or "").strip():
                    raise ValidationError(
                        {
                            "system_prompt": [
                                "this persona is a draft: write its system prompt to approve; "
                                "it is never generated"
                            ]
                        }
                    )
                changes["system_prompt"] = system_prompt
            elif system_prompt is not None:
                raise ValidationError(
                    {"system_prompt": ["only a draft's prompt is written on approval"]}
                )
            persona = persona_update(
                persona=persona,
                actor=actor,
                expect_composition_hash=proposal.next_composition_hash,
                as_drafted=drafted,
                **changes,
            )
            _decide(proposal, actor, GrantProposal.Status.APPROVED, persona.generation)
            return persona
    except StaleProposal:
        GrantProposal.objects.filter(pk=proposal.pk, status=GrantProposal.Status.PENDING).update(
            status=GrantProposal.Status.STALE
        )
        raise


@transaction.atomic
def proposal_reject(*, proposal: GrantProposal, actor: User) -> GrantProposal:
    """The owner rejects: nothing of the persona changes."""
    proposal = _pending(proposal, actor)
    _decide(proposal, actor, GrantProposal.Status.REJECTED, None)
    return proposal


def _decide(
    proposal: GrantProposal, actor: User, status: GrantProposal.Status, generation: int | None
) -> None:
    proposal.status = status
    proposal.decided_by = actor  # type: ignore[assignment]
    proposal.decided_at = timezone.now()
    proposal.applied_generation = generation
    proposal.save(update_fields=["status", "decided_by", "decided_at", "applied_generation"])


@transaction.atomic
def persona_delete(*, persona: Persona, actor: User) -> None:
    _require_owner(actor, persona.agent)
    persona.delete()


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
    AuditEvent.objects.create(
        kind=AuditEvent.Kind.DISCOVERABILITY,
        actor=actor,
        persona=persona,
        agent=persona.agent,
        data={"from": persona.discoverable, "to": discoverable, "via": via},
    )
    persona.discoverable = discoverable
    persona.save(update_fields=["discoverable", "updated_at"])
    return persona


# Revocation -----------------------------------------------------------------------------------

REVOCATION_REASON_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Revocation:
    persona: Persona
    generations: list[int]
    reason_code: str
    at: Any


@transaction.atomic
def persona_revoke(
    *,
    persona: Persona,
    actor: User,
    reason_code: str,
    reason: str,
    via: str,
    generation: int | None = None,
) -> Revocation:
    """Revoke a persona, or one of its generations, at once (VX-TRUST-5).

    The owner revokes their own; a moderator (superuser) may revoke any. The revoked generations
    stop standing in this transaction and never stand again (the database refuses it); every
    web process withdraws the card on its next request (the card token moves, now and after the
    commit), its runtime refuses naming the revocation, and what waits on or was learned under
    the revoked stamps is cancelled or retired (`persona_revoked`, in this transaction).

    Without `generation` the persona itself is revoked, finally: it never changes again. A
    revoked generation alone is followed by the owner's next edit, a new generation.
    """
    persona = (
        Persona.objects.select_for_update(of=("self",)).select_related("agent").get(pk=persona.pk)
    )
    is_owner = actor.is_authenticated and persona.agent.owner_id == actor.pk
    is_moderator = actor.is_authenticated and getattr(actor, "is_superuser", False)
    if not (is_owner or is_moderator):
        raise PermissionDenied("only the persona's owner or a moderator may revoke it")
    errors: dict[str, list[str]] = {}
    if reason_code not in RevocationReason.values:
        errors["reason_code"] = [
            f"unknown reason code {reason_code!r}; one of {', '.join(RevocationReason.values)}"
        ]
    if not isinstance(reason, str) or not reason.strip():
        errors["reason"] = ["say why: the reason is kept in the audit event"]
    elif len(reason) > REVOCATION_REASON_LIMIT:
        errors["reason"] = [f"at most {REVOCATION_REASON_LIMIT} characters"]
    if persona.is_revoked:
        errors["persona"] = [_revoked_message(persona)]
    generations = Generation.objects.select_for_update().filter(persona=persona)
    if generation is not None:
        generations = generations.filter(number=generation)
        found = generations.first()
        if found is None:
            errors["generation"] = [f"persona {persona.uuid} has no generation {generation}"]
        elif found.is_revoked:
            errors["generation"] = [f"generation {generation} is already revoked"]
    if errors:
        raise ValidationError(errors)
    now = timezone.now()
    revoked = list(generations.filter(revoked_at__isnull=True).order_by("number"))
    who = "its owner" if is_owner else "a moderator"
    note = f"revoked by {who} at {now.isoformat()} ({reason_code})"
    for revoked_generation in revoked:
        revoked_generation.revoked_at, revoked_generation.revocation_reason = now, reason_code
        revoked_generation.standing = False
        revoked_generation.not_standing_reasons = [
            note,
            *revoked_generation.not_standing_reasons,
        ]
    update_each(revoked, ["revoked_at", "revocation_reason", "standing", "not_standing_reasons"])
    numbers = [revoked_generation.number for revoked_generation in revoked]
    fields = ["updated_at"]
    if generation is None:
        persona.revoked_at, persona.revocation_reason = now, reason_code
        fields += ["revoked_at", "revocation_reason"]
    if generation is None or generation == persona.generation:
        persona.standing = False
        fields.append("standing")
    persona.save(update_fields=fields)
    AuditEvent.objects.create(
        kind=AuditEvent.Kind.REVOKED,
        actor=actor,
        persona=persona,
        agent=persona.agent,
        data={
            "scope": "persona" if generation is None else "generation",
            "generations": numbers,
            "reason_code": reason_code,
            "reason": reason,
            "via": via,
            "as": "owner" if is_owner else "moderator",
        },
    )
    persona_revoked.send(
        Persona,
        persona=persona,
        stamp_hashes=[g.stamp_hash for g in revoked if g.stamp_hash],
    )
    personas_written.send(Persona, uuids=[persona.uuid], after_commit=True)
    return Revocation(persona, numbers, reason_code, now)


# Owner identity -------------------------------------------------------------------------------


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


# The verb->skill map (staff only) ----------------------------------------------------------------


def _require_staff(actor: User) -> None:
    if not (actor.is_authenticated and getattr(actor, "is_superuser", False)):
        raise PermissionDenied("only staff administrators may change the verb->skill map")


@transaction.atomic
def skill_save(
    *,
    actor: User,
    slug: str,
    name: str,
    description: str,
    required_verbs: list[str],
    tags: list[str] | None = None,
) -> Skill:
    """Create or change a skill; every affected persona is recomputed by a Celery fan-out."""
    _require_staff(actor)
    required = _require_string_list("required_verbs", required_verbs)
    if not required:
        raise ValidationError({"required_verbs": ["a skill requires at least one verb"]})
    unknown = unknown_verbs(required)
    if unknown:
        raise ValidationError({"required_verbs": [f"unknown verbs: {', '.join(unknown)}"]})
    skill = Skill.objects.filter(slug=slug).first() or Skill(slug=slug)
    skill.name, skill.description = name, description
    skill.required_verbs = sorted(required)
    skill.tags = _require_string_list("tags", tags or [])
    if not skill.tags:
        raise ValidationError({"tags": ["a skill needs at least one tag (A2A cards require tags)"]})
    skill.full_clean()
    skill.save()
    _record_map_change(actor, slug, "saved")
    return skill


@transaction.atomic
def skill_delete(*, actor: User, skill: Skill) -> None:
    _require_staff(actor)
    slug = skill.slug
    skill.delete()
    _record_map_change(actor, slug, "deleted")


def _record_map_change(actor: User, slug: str, change: str) -> None:
    AuditEvent.objects.create(
        kind=AuditEvent.Kind.SKILL_MAP_CHANGED,
        actor=actor if actor.is_authenticated else None,
        data={"skill": slug, "change": change},
    )
    SkillMapRevision.objects.get_or_create(pk=1)
    SkillMapRevision.objects.filter(pk=1).update(revision=F("revision") + 1)
    queue_after_commit(FAN_OUT_SKILL_MAP)


def settle_persona_batch(persona_ids: Iterable[int]) -> list[Persona]:
    """Recompute skills of many personas from the committed map, one transaction, few queries.

    Returns the personas that opened a new generation. Used by the Celery tasks; idempotent.
    Whatever the batch size, it reads the personas and their current generations in two
    queries and writes in three (new generations, changed personas, personas only behind).
    """
    skill_map = current_skill_map()
    changed: list[Persona] = []
    behind_only: list[Persona] = []
    with transaction.atomic():
        personas = list(
            Persona.objects.select_for_update(of=("self",))
            .select_related("agent__owner__identity", "address", "owning_lead")
            .filter(pk__in=list(persona_ids))
            .order_by("pk")
        )
        # The rows are locked, so each persona's current number cannot move under this read.
        current = {
            generation.persona_id: generation
            for generation in Generation.objects.filter(
                persona__in=[persona.pk for persona in personas],
                number=F("persona__generation"),
            )
        }
        generations: list[Generation] = []
        for persona in personas:
            behind = persona.skill_map_revision != skill_map.revision
            generation = _next_generation(persona, skill_map, current.get(persona.pk))
            if generation is not None:
                generations.append(generation)
                changed.append(persona)
            elif behind:
                behind_only.append(persona)
        Generation.objects.bulk_create(generations)
        now = timezone.now()
        for persona in changed:
            persona.updated_at = now
        update_each(
            changed, ["skills", "skill_map_revision", "generation", "standing", "updated_at"]
        )
        update_each(behind_only, ["skill_map_revision"])
        # A bulk write sends no post_save: the changed cards' tokens move on this (cards.apps),
        # and again when each new generation's card is published after the commit.
        personas_written.send(Persona, uuids=[persona.uuid for persona in changed])
    return changed
