"""Explain one tool call: what handle() would decide, and why, without its having any effect.

`explain(persona, tool, arguments)` asks runtime.handler.decide() the very question handle()
asks, as a dry run, and reads the answer: whether each of the three consumers has the tool,
the verdict (allow, confirm, deny, refused), the rule that decided it, who a confirmation
would go to and through which surface, and the normalised operation a learned choice would be
keyed on. It stops where handle() would first act: no record is written, nobody is asked, no
tool runs, no stamp file or workspace directory is made. What a tool itself checks when it runs
(a file's existence, the binding's mutable paths) is therefore not foreseen: the answer says so.
"""

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from personas.catalogue import Boundary
from personas.models import Persona
from runtime.handler import Decision, Stop, decide
from runtime.models import AuthorityKind, PromptRegistryEntry
from runtime.redaction import redact_text
from runtime.rules import RULES_BY_ID, Outcome
from runtime.stamp import ActiveStamp

# A correlation id handle() accepts and explain never records under: decide() checks only its
# shape, and looking up a decision record under it is an effect phase handle() alone takes.
EXPLAIN_CORRELATION = "explain"

REFUSED = "refused"

# Why a call is refused before any rule is applied, by the code handle() answers with.
_WHY = {
    "not_granted": "not in the stamp",
    "revoked": "revoked",
    "invalid_arguments": "invalid arguments",
    "not_implemented": "no bound implementation",
    "os_error": "the file system refused",
}

AFTER = (
    "the tool's own checks when it runs (that a file exists, that a write lies within the "
    "binding's mutable paths, the record it names) are not made: explain stops before it runs"
)


@dataclass(frozen=True, slots=True)
class Explanation:
    """What handle() would do with one call. `as_json()` is what the command and API print."""

    persona: str
    tool: str
    verdict: str
    code: str | None
    reason: str
    rule: dict[str, Any]
    consumers: dict[str, bool] | None
    stamp: dict[str, Any] | None
    operation: dict[str, Any] | None
    confirmation: dict[str, Any] | None = None
    refused_because: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "persona": self.persona,
            "tool": self.tool,
            "verdict": self.verdict,
            "code": self.code,
            "refused_because": self.refused_because,
            "reason": self.reason,
            "rule": self.rule,
            "confirmation": self.confirmation,
            "consumers": self.consumers,
            "operation": self.operation,
            "stamp": self.stamp,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        """The same answer for a person, one fact a line."""
        verdict = self.verdict + (f" ({self.refused_because})" if self.refused_because else "")
        out = [f"{self.tool} for persona {self.persona}: {verdict}", f"  reason: {self.reason}"]
        rule = ", ".join(f"{key} {value}" for key, value in self.rule.items() if value)
        out.append(f"  rule: {rule}")
        if self.confirmation:
            out.append(
                f"  asks: {self.confirmation['authority']} through {self.confirmation['surface']}"
            )
        if self.consumers is not None:
            seen = ", ".join(
                f"{name} {'yes' if has else 'no'}" for name, has in self.consumers.items()
            )
            out.append(f"  consumers: {seen}")
        if self.operation is not None:
            out.append(f"  handler action: {self.operation['handler_action']}")
            out.append(f"  target scope: {_compact(self.operation['target_scope'])}")
            out.append(f"  operation shape: {_compact(self.operation['shape'])}")
        if self.stamp is not None:
            generation, digest = self.stamp["generation"], self.stamp["sha256"]
            out.append(f"  stamp: generation {generation}, sha256 {digest}")
        out.extend(f"  note: {note}" for note in self.notes)
        return out


def explain(
    persona: Persona,
    tool_name: str,
    arguments: dict[str, Any] | None,
    *,
    under: ActiveStamp | None = None,
) -> Explanation:
    """handle()'s decision for this call, as a dry run: nothing is written, asked or run.

    `under`: the stamp to decide under in place of the persona's active one (a proposal's)."""
    decision = decide(persona, tool_name, arguments, EXPLAIN_CORRELATION, dry_run=True, under=under)
    return explanation_of(persona, tool_name, decision)


def verdict_and_rule(persona: Persona, tool_name: str, decision: Decision) -> tuple[str, str]:
    """The verdict and the deciding rule's id (a refusal's code before any rule) of a decision
    handle() made: what its span carries (runtime.tracing), in explain's own words."""
    found = explanation_of(persona, tool_name, decision)
    return found.verdict, str(found.rule.get("id") or found.code)


def explanation_of(persona: Persona, tool_name: str, decision: Decision) -> Explanation:
    """A decision of runtime.handler.decide() in an owner's words."""
    stamp = decision.context.stamp
    op = decision.context.op
    common: dict[str, Any] = {
        "persona": str(persona.uuid),
        "tool": tool_name,
        "consumers": _consumers(stamp, tool_name) if stamp else None,
        "stamp": {"generation": stamp.generation, "sha256": stamp.stamp_hash} if stamp else None,
        "operation": (
            {
                "handler_action": op.action,
                # As records keep it: a secret value the call carries is never shown back.
                "target_scope": op.recorded()["target"],
                "shape": op.recorded()["shape"],
            }
            if op
            else None
        ),
    }
    if decision.refusal is not None:
        return _stopped(decision, decision.refusal, common)
    if decision.held is not None:
        return _stopped(decision, decision.held, common)
    verdict = decision.verdict
    assert verdict is not None
    rule = _rule(verdict.rule, verdict.boundary)
    if verdict.outcome is Outcome.ALLOW:
        return Explanation(
            verdict=Outcome.ALLOW.value,
            code=None,
            reason=verdict.reason,
            rule=rule,
            notes=[AFTER],
            **common,
        )
    confirmation = _confirmation(decision)
    learned = decision.learned
    if learned is None:
        return Explanation(
            verdict=Outcome.CONFIRM.value,
            code="confirmation_required",
            reason=redact_text(verdict.reason),
            rule=rule,
            confirmation=confirmation,
            **common,
        )
    approve = learned.choice == PromptRegistryEntry.Choice.APPROVE
    answered = {
        **rule,
        "kind": "learned choice",
        "learned_choice": learned.pk,
        "layer": learned.location,
        "asked_under": verdict.rule,
    }
    return Explanation(
        verdict=Outcome.ALLOW.value if approve else Outcome.DENY.value,
        code=None if approve else "denied_by_learned_choice",
        reason=(
            f"a learned choice {'approves' if approve else 'refuses'} this exact operation "
            f"({redact_text(verdict.reason)})"
        ),
        rule=answered,
        confirmation=confirmation,
        notes=[AFTER] if approve else [],
        **common,
    )


def _stopped(decision: Decision, stop: Stop, common: dict[str, Any]) -> Explanation:
    verdict = stop.verdict
    if verdict is not None and verdict.outcome is Outcome.DENY:
        outside = verdict.boundary is Boundary.CROSS_SCOPE
        return Explanation(
            verdict=Outcome.DENY.value,
            code=stop.code,
            reason=redact_text(stop.reason),
            rule=_rule(verdict.rule, verdict.boundary),
            refused_because="outside scope" if outside else None,
            **common,
        )
    if stop.quarantined:
        why = "quarantined"
    elif stop.code == "stamp_unavailable" and decision.context.stamp is not None:
        why = "no authority to ask"
    elif stop.code == "stamp_unavailable":
        why = "no standing stamp"
    else:
        why = _WHY.get(stop.code, stop.code)
    rule = (
        _rule(verdict.rule, verdict.boundary) if verdict else {"kind": "refusal", "id": stop.code}
    )
    return Explanation(
        verdict=REFUSED,
        code=stop.code,
        reason=redact_text(stop.reason),
        rule=rule,
        refused_because=why,
        notes=_closest_tool(decision.context.stamp, common["tool"])
        if stop.code == "not_granted"
        else [],
        **common,
    )


def _closest_tool(stamp: ActiveStamp | None, tool_name: str) -> list[str]:
    """For a tool the stamp does not list: the listed one its name was likely meant as."""
    if stamp is None:
        return []
    close = difflib.get_close_matches(tool_name, stamp.mcp_tools, n=1, cutoff=0.8)
    return [f"did you mean {close[0]}?"] if close else []


def _rule(rule_id: str, boundary: Boundary | None) -> dict[str, Any]:
    """The rule as an owner reads it: a row of runtime.rules (a global boundary's), the stamp's
    `access: confirm` (the class profile or the owner's ask-first), or the positive default."""
    if rule_id in RULES_BY_ID:
        kind = "boundary"
    elif rule_id == "stamp-access-confirm":
        kind = "class condition"
    else:
        kind = "default"
    return {"kind": kind, "id": rule_id, "boundary": boundary.value if boundary else None}


def _confirmation(decision: Decision) -> dict[str, Any]:
    authority, stamp = decision.authority, decision.context.stamp
    assert authority is not None and stamp is not None
    if authority.kind == AuthorityKind.HUMAN:
        channel = stamp.document["authority"]["human"]["channel"]
        surface = f"{channel}: the owner's authority surface, or the admin's decision records"
        who = {"kind": "human", "owner": authority.user.get_username()}
    else:
        assert authority.persona is not None
        surface = f"the lead's inbox (virgo:persona/{authority.persona.uuid})"
        who = {"kind": "owning lead", "persona": str(authority.persona.uuid)}
    return {"authority": authority.label, "surface": surface, **who}


def _consumers(stamp: ActiveStamp, tool_name: str) -> dict[str, bool]:
    """Whether each of the three consumers' projections of the stamp has the tool."""
    return {
        "mcp_server": tool_name in stamp.mcp_tools,
        "launcher_allowlist": tool_name in stamp.allowlist,
        "handler_table": tool_name in stamp.tools,
    }


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
