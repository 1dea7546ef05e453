"""What the runtime tells the audit trail (VX-AUDIT-1): every call held for confirmation, every
answer to one, every learned choice applied and every refusal, each once, under the call's
correlation id and through `runtime` (an answer: through the channel that carried it).

The persona that made the call is the actor of what the handler decided (it has no account,
so it is named); the human or lead who answered is the actor of an answer.
"""

from typing import Any

from personas import audit
from personas.models import AuditEvent, Persona
from runtime.models import DecisionRecord, PromptRegistryEntry
from virgo import auditing


def _call(persona: Persona, tool: str, **extra: Any) -> dict[str, Any]:
    return {
        "persona_name": persona.name,
        "tool": tool,
        **{key: value for key, value in extra.items() if value not in (None, "")},
    }


def confirmation_requested(record: DecisionRecord, persona: Persona) -> None:
    audit.record(
        AuditEvent.Kind.CONFIRMATION_REQUESTED,
        actor_name=f"persona {persona.name}",
        persona=persona,
        data=_call(
            persona,
            record.tool_name,
            authority=record.authority_label,
            boundary=record.boundary,
            rule=record.rule,
            reason=record.reason,
        ),
        channel=auditing.RUNTIME,
        correlation_id=record.correlation_id,
    )


def learned_choice_used(
    record: DecisionRecord, persona: Persona, entry: PromptRegistryEntry
) -> None:
    audit.record(
        AuditEvent.Kind.LEARNED_CHOICE_USED,
        actor_name=f"persona {persona.name}",
        persona=persona,
        data=_call(
            persona,
            record.tool_name,
            choice=entry.choice,
            learned_from=PromptRegistryEntry.Location(entry.location).label,
            boundary=record.boundary,
            rule=record.rule,
        ),
        channel=auditing.RUNTIME,
        correlation_id=record.correlation_id,
    )


def call_refused(
    persona: Persona,
    tool: str,
    *,
    code: str,
    reason: str,
    boundary: str | None,
    rule: str,
    correlation_id: str,
) -> None:
    if code == "denied_by_learned_choice":
        return  # recorded once, as the learned choice applied
    audit.record(
        AuditEvent.Kind.CALL_REFUSED,
        actor_name=f"persona {persona.name}",
        persona=persona,
        data=_call(persona, tool, code=code, boundary=boundary, rule=rule, reason=reason),
        channel=auditing.RUNTIME,
        correlation_id=correlation_id,
    )


def confirmation_answered(record: DecisionRecord, *, user: Any, persona: Persona | None) -> None:
    """An answer, by a human (admin, hub callback) or by the lead persona (a tool call)."""
    requester = record.requester
    audit.record(
        AuditEvent.Kind.CONFIRMATION_ANSWERED,
        actor=user,
        actor_name="" if persona is None else f"persona {persona.name}",
        persona=requester,
        data=_call(
            requester,
            record.tool_name,
            decision=record.decision,
            authority=record.authority_label,
            asked_under=record.correlation_id,
        ),
        channel=None if persona is None else auditing.RUNTIME,
    )
