"""An owner's agents and the grant each is vended: creating, changing and deleting one.

Narrowing an agent's grant narrows its personas in the same transaction, each to a new generation
and an audit event (_narrow_personas); widening it changes no persona.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from personas import audit
from personas.models import Agent, AuditEvent
from personas.services.derivation import current_skill_map
from personas.services.generations import _queue_settle, _settle_generation, _supersede_proposals
from personas.services.revocation import KEPT_TOMBSTONE, keep_tombstone, revoke_before_deleting
from personas.services.validation import User, _require_owner, validate_grant


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
        audit.record(
            AuditEvent.Kind.GRANT_NARROWED,
            actor=actor,
            agent=agent,
            persona=persona,
            data={
                "removed_verbs": dropped_verbs,
                "removed_queues": dropped_queues,
                "generation": persona.generation,
            },
        )
        _queue_settle(persona)


@audit.action
@transaction.atomic
def agent_delete(*, agent: Agent, actor: User) -> None:
    """Delete an agent and its personas. While one of them is revoked only a superuser may, as
    a purge that keeps its tombstone (personas.services.persona_purge)."""
    _require_owner(actor, agent)
    revoked = list(agent.personas.with_tombstone())
    if revoked and not getattr(actor, "is_superuser", False):
        names = ", ".join(repr(persona.name) for persona in revoked)
        raise PermissionDenied(
            f"agent {agent.name!r} has revoked personas ({names}): {KEPT_TOMBSTONE}"
        )
    for persona in revoked:
        keep_tombstone(persona, actor=actor)
    # A revoked persona's purge is recorded by keep_tombstone; every other one is revoked first,
    # as its own deletion would (VX-TRUST-9), and deleted here.
    deleted = list(agent.personas.exclude(pk__in=[p.pk for p in revoked]).select_related("agent"))
    facts = [
        (
            p,
            audit.deleted_persona_facts(
                p, with_agent=True, revoked=revoke_before_deleting(p, actor=actor)
            ),
        )
        for p in deleted
    ]
    audit.record_each(AuditEvent.Kind.PERSONA_DELETED, facts, actor=actor)
    agent.delete()
