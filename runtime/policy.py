"""The operation classifier's engine: decide allow, confirm or deny for a call in normal form.

The call is normalised first (runtime.operations); the rules it is judged by are a table
(runtime.rules), applied here: the first deny, else the first confirm, else allow.

The classifier only ever narrows: a call that reaches it is already for a tool the stamp grants,
and nothing here can grant another.
"""

from dataclasses import dataclass

from personas.catalogue import VERBS_BY_NAME, Boundary
from runtime.operations import Binding, Operation, normalise
from runtime.rules import EXAMPLE_BINDING, RULES, Example, Outcome


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    boundary: Boundary | None
    rule: str
    reason: str


def classify(op: Operation, binding: Binding, *, access: str = "allow") -> Verdict:
    """The verdict for one operation: the first deny, else the first confirm, else allow.

    `access` is the stamp's `access` of the tool: `confirm` asks even when no boundary does.
    """
    for outcome in (Outcome.DENY, Outcome.CONFIRM):
        for rule in RULES:
            if rule.outcome is outcome:
                reason = rule.test(op, binding)
                if reason:
                    return Verdict(outcome, rule.boundary, rule.id, reason)
    if access == "confirm":
        return Verdict(
            Outcome.CONFIRM,
            op.declared_boundary,
            "stamp-access-confirm",
            f"the stamp grants {op.tool} with access: confirm",
        )
    return Verdict(Outcome.ALLOW, None, "default-allow", "ordinary work inside the binding")


def classify_example(example: Example, *, binding: Binding = EXAMPLE_BINDING) -> Verdict:
    """Classify a table example as the persona of EXAMPLE_BINDING would call it."""
    verb = VERBS_BY_NAME[example.tool]
    op = normalise(
        tool=example.tool, action=verb.handler_action, arguments=example.arguments, binding=binding
    )
    return classify(op, binding)
