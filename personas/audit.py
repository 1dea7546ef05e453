"""The audit trail's one writer, and its words (VX-AUDIT-1, VX-AUDIT-2).

`record()` is the only way an AuditEvent is made. It names the actor as they are called now
(kept beside the link, so the name outlives the account), and takes the channel and correlation
id from the entry point the work came through (virgo.auditing), so a service never says how it
was reached and every entry point to the same service records alike.

One action, one record. A service that is an action of its own is decorated `@action`; when it
runs inside another action (an approval making its change through persona_update, an import
creating its persona through persona_draft), what it would record is part of the outer action,
which records it in its own words, and is dropped. A `consequence` is recorded wherever it
happens: what the action did to something else (a proposal it made stale).

`describe()` tells an event in one line, `details()` as labelled values: the admin and the
JSON lines export (`virgo audit export`) both read them, never the raw data.
"""

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from functools import wraps
from typing import Any

from personas.models import Agent, AuditEvent, Persona
from virgo import auditing

Kind = AuditEvent.Kind

_depth: ContextVar[int] = ContextVar("virgo_audit_action_depth", default=0)


def action[F: Callable[..., Any]](func: F) -> F:
    """Mark a service as one audited action: the services it calls record nothing of their own
    (but consequences), it records what was done."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _depth.set(_depth.get() + 1)
        try:
            return func(*args, **kwargs)
        finally:
            _depth.reset(token)

    return wrapper  # type: ignore[return-value]


def name_of(user: Any) -> str:
    if user is None or not getattr(user, "is_authenticated", False):
        return ""
    return str(user.get_username())


def _event(
    kind: AuditEvent.Kind,
    *,
    actor: Any,
    actor_name: str,
    persona: Persona | None,
    agent: Agent | None,
    data: dict[str, Any] | None,
    channel: str | None,
    correlation_id: str | None,
) -> AuditEvent:
    context = auditing.current()
    user = actor if getattr(actor, "is_authenticated", False) else None
    name = actor_name or name_of(user) or context.operator
    if persona is not None and agent is None:
        agent = persona.agent
    data = data or {}
    if context.connection:
        data = {**data, "connection": context.connection}
    return AuditEvent(
        kind=kind,
        actor=user,
        actor_name=name[:150],
        persona=persona,
        agent=agent,
        data=data,
        channel=channel or context.channel,
        correlation_id=(context.correlation_id if correlation_id is None else correlation_id)[:200],
    )


def record(
    kind: AuditEvent.Kind,
    *,
    actor: Any = None,
    actor_name: str = "",
    persona: Persona | None = None,
    agent: Agent | None = None,
    data: dict[str, Any] | None = None,
    channel: str | None = None,
    correlation_id: str | None = None,
    consequence: bool = False,
) -> AuditEvent | None:
    """Append one event; None when it is part of an outer action, which records instead.

    `actor` is the account that acted (None, or an anonymous user, when none did: then the
    operator of the command, if any, is named); `actor_name` names an actor without an account
    (a persona calling a tool). `channel` and `correlation_id` default to the entry point's."""
    if _depth.get() > 1 and not consequence:
        return None
    event = _event(
        kind,
        actor=actor,
        actor_name=actor_name,
        persona=persona,
        agent=agent,
        data=data,
        channel=channel,
        correlation_id=correlation_id,
    )
    event.save()
    return event


def record_each(
    kind: AuditEvent.Kind,
    about: Iterable[tuple[Persona, dict[str, Any]]],
    *,
    actor: Any = None,
    consequence: bool = False,
) -> list[AuditEvent]:
    """`record()` of one kind for many personas (a batch's new generations, an agent's personas
    deleted with it), in one insert, so a batch costs the same queries whatever its size. The
    personas' agents should be loaded."""
    if _depth.get() > 1 and not consequence:
        return []
    events = [
        _event(
            kind,
            actor=actor,
            actor_name="",
            persona=persona,
            agent=None,
            data=data,
            channel=None,
            correlation_id=None,
        )
        for persona, data in about
    ]
    return AuditEvent.objects.bulk_create(events) if events else []


def deleted_persona_facts(
    persona: Persona, *, with_agent: bool = False, revoked: list[int] | None = None
) -> dict[str, Any]:
    """What a "persona deleted" event keeps of a persona about to go: its link is cleared with
    the row, so the names stay in the data; and the generations its deletion revoked."""
    facts: dict[str, Any] = {
        "name": persona.name,
        "persona": str(persona.uuid),
        "agent_name": persona.agent.name,
    }
    if with_agent:
        facts["with_agent"] = True
    if revoked is not None:
        facts["revoked_generations"] = revoked
    return facts


# Telling an event --------------------------------------------------------------------------------


def _join(values: Iterable[Any]) -> str:
    return ", ".join(str(value) for value in values) or "none"


def _listed(value: Any) -> str:
    return {True: "listed", False: "not listed"}.get(value, "?")


def describe(kind: str, data: dict[str, Any]) -> str:
    """One line in words: what happened, never an id or a `None` (what was not recorded reads
    as `?`)."""
    data = data or {}

    def said(key: str, default: str = "?") -> Any:
        value = data.get(key)
        return default if value is None or value == "" else value

    name = said("name", "the persona")
    generation = data.get("generation")
    at_generation = f" (generation {generation})" if generation else ""
    which = f"generation {generation}" if generation else "a generation"
    call = f"{said('tool', 'a tool')} of {said('persona_name', 'a persona')}"
    match kind:
        case Kind.PERSONA_CREATED:
            held = "; its grant waits for the owner's review" if data.get("held") else ""
            return f"{name} created{at_generation}{held}"
        case Kind.PERSONA_EDITED:
            new = f", generation {generation}" if generation else ", no new generation"
            return f"{name} changed: {_join(data.get('fields', []))}{new}"
        case Kind.GENERATION:
            return f"{name} at {which}: {said('why', 'recomputed')}"
        case Kind.PERSONA_DELETED:
            with_agent = f" with its agent {said('agent_name')}" if data.get("with_agent") else ""
            revoked = (
                ", revoked first: its card answers with its tombstone"
                if data.get("revoked_generations")
                else ""
            )
            return f"{name} deleted{with_agent}{revoked}"
        case Kind.PROPOSAL_MADE:
            why = "; ".join(data.get("widening", [])) or "it widens the grant"
            return f"change of {name} held for the owner: {why}"
        case Kind.PROPOSAL_APPROVED:
            return f"change of {name} approved: {_join(data.get('fields', []))}{at_generation}"
        case Kind.PROPOSAL_REJECTED:
            return f"change of {name} rejected: {_join(data.get('fields', []))}"
        case Kind.PROPOSAL_STALE:
            return (
                f"change of {name} proposed at generation {said('base_generation')} went "
                f"stale: {said('why', 'the persona changed')}"
            )
        case Kind.CARD_IMPORTED:
            left = said("skills_left_out", "no")
            return f"{name} imported from the agent card {said('source')} ({left} skills left out)"
        case Kind.SNAPSHOT_IMPORTED:
            return f"{name} imported from a snapshot of {said('source_persona')}"
        case Kind.DISCOVERABILITY:
            change = f"{_listed(data.get('from'))} → {_listed(data.get('to'))}"
            return f"{change} (via {said('via')})"
        case Kind.GRANT_NARROWED:
            removed = [*data.get("removed_verbs", []), *data.get("removed_queues", [])]
            return f"removed {_join(removed)}{at_generation}"
        case Kind.SKILL_MAP_CHANGED:
            return f"skill {said('skill')} {said('change', 'changed')}"
        case Kind.STAMP_QUARANTINED:
            return f"{which}: {'; '.join(data.get('reasons', [])) or 'quarantined'}"
        case Kind.STAMP_REPAIRED:
            return f"{which}: {said('path', 'its stamp file')} {said('repair', 'repaired')}"
        case Kind.STAMP_RESTORED:
            aside = data.get("set_aside")
            kept = f" (the file found there kept as {aside})" if aside else ""
            return f"{which}: {said('path', 'its stamp file')} restored{kept}"
        case Kind.IDENTITY_LINKED:
            return f"OpenID Connect {said('issuer')} subject {said('subject')} proven"
        case Kind.REVOKED:
            return _describe_revocation(data)
        case Kind.PURGED:
            how = "with a deletion" if data.get("via") == "deletion" else "by a superuser"
            return (
                f"{name} ({said('persona')}) purged {how}; its tombstone kept: "
                f"revoked {said('revoked_at')}, {said('reason_code')}"
            )
        case Kind.ORGANIZATION_VERIFIED:
            return f"{said('domain')} verified ({said('verification')})"
        case Kind.ORGANIZATION_APPROVED:
            owner = said("owner_name", "its owner")
            return f"{said('domain')} approved by the {said('by', 'superuser')} for {owner}"
        case Kind.ORGANIZATION_LAPSED:
            return f"{said('domain')} no longer proven: {said('reason')}"
        case Kind.ORGANIZATION_SHARED:
            return f"{said('domain')} shared with {said('with_name', 'another owner')}"
        case Kind.KEY_CREATED | Kind.KEY_ROTATED | Kind.KEY_RETIRED | Kind.KEY_REVOKED:
            verb = Kind(kind).label.removeprefix("Signing key ")
            return f"signing key {said('kid')} ({said('algorithm')}) {verb}"
        case Kind.BASE_URL_MOVED:
            if not data.get("from"):
                return f"public base URL recorded: {said('to')}"
            return f"public base URL moved from {data['from']} to {said('to')}"
        case Kind.CONFIRMATION_REQUESTED:
            reason = f" ({data['reason']})" if data.get("reason") else ""
            return f"{call} held: {said('authority', 'its authority')} is asked{reason}"
        case Kind.CONFIRMATION_ANSWERED:
            return f"{call} {said('decision', 'answered')} by {said('authority', 'its authority')}"
        case Kind.LEARNED_CHOICE_USED:
            verb = {"approve": "approves", "deny": "refuses"}.get(data.get("choice"), "decides")
            return f"{call}: a learned choice {verb} it"
        case Kind.CALL_REFUSED:
            reason = f": {data['reason']}" if data.get("reason") else ""
            return f"{call} refused ({said('code')}){reason}"
    return ", ".join(f"{label}: {value}" for label, value in details(data)) or "-"


def _describe_revocation(data: dict[str, Any]) -> str:
    generations = data.get("generations", [])
    numbers = ", ".join(str(number) for number in generations)
    counted = "generation" if len(generations) == 1 else "generations"
    scope = "the whole persona" if data.get("scope") == "persona" else "its current generation"
    why = f": {data['reason']}" if data.get("reason") else ""
    return (
        f"{scope} revoked ({counted} {numbers or 'none'}), {data.get('reason_code') or '?'}"
        f"{why}; by its {data.get('as') or 'owner'} via {data.get('via') or '?'}"
    )


# Labels for the keys an event's data may hold; any other key is shown by its own name, spaced.
LABELS = {
    "name": "persona",
    "persona": "persona uuid",
    "persona_name": "persona",
    "generation": "generation",
    "generations": "generations",
    "fields": "fields changed",
    "held": "grant held for review",
    "widening": "why it waits",
    "via": "through",
    "base_generation": "proposed at generation",
    "why": "why",
    "from": "before",
    "to": "after",
    "removed_verbs": "verbs removed",
    "removed_queues": "queues removed",
    "reason_code": "reason code",
    "reason": "reason",
    "as": "as",
    "scope": "scope",
    "revoked_at": "revoked at",
    "owner_name": "owner",
    "with_name": "shared with",
    "agent_name": "agent",
    "kid": "key id",
    "tool": "tool",
    "code": "code",
    "boundary": "boundary",
    "rule": "rule",
    "authority": "asked",
    "decision": "decision",
    "choice": "learned choice",
    "source": "source",
    "skills_left_out": "skills left out",
    "found_by": "found by",
    "set_aside": "set aside as",
}
# Raw ids kept for the machines (visibility, links): never shown.
_HIDDEN = frozenset({"owner", "with", "agent", "proposal"})


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return _join(_shown(item) for item in value) if value else "none"
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_shown(item)}" for key, item in value.items()) or "-"
    return str(value)


def details(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The event's data as (label, value) pairs, in words, without raw ids."""
    return [
        (LABELS.get(key, key.replace("_", " ")), _shown(value))
        for key, value in (data or {}).items()
        if key not in _HIDDEN
    ]
