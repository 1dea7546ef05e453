"""A persona's policy vectors: calls that must be allowed, confirmed and denied, each with the
verdict and rule explain gives it now, to replay against its grant later (VX-EXPLAIN-2).

The calls come from two places only, so a vectors file needs no hand-written list of its own:
for each tool of the stamp, a call built from the tool's declared arguments and the same call
in another workspace (denied as cross-scope); and every example of the rule table
(runtime.rules), its neighbours too where the persona has the tool, so each global boundary is
there. Replaying explains each call against the persona's current grant (runtime.explain, the
same decision handle() makes) and names every call whose verdict or rule changed.
"""

import json
from typing import Any

from personas.models import Generation, Persona
from runtime.explain import Explanation, explain
from runtime.rules import EXAMPLE_PERSONA, RULES, Example
from runtime.stamp import ActiveStamp, StampUnavailable, composed_stamp, load_active_stamp
from runtime.tools.params import Choice, Id, Integer, Object, Param, Records, Strings
from runtime.tools.toolkit import Tool
from runtime.tools.workspace import TOOL_ARGUMENTS
from stamps.registry import HANDLERS
from stamps.review import next_stamp
from stamps.vectors import Changed, MalformedVectors, PersonaUnexplainable, Replay

FORMAT = "virgo-policy-vectors/1"
# A workspace no persona is bound to: the cross-scope boundary's denial for every tool.
ELSEWHERE = "elsewhere-not-bound"
# The id a sampled Id argument names: no record has it, which the tool finds when it runs.
_UUID = "00000000-0000-4000-8000-00000000000a"


def export(persona: Persona) -> dict[str, Any]:
    stamp = _stamp(persona)
    vectors = []
    seen: set[str] = set()
    for source, tool, arguments in _calls(persona, stamp):
        key = json.dumps([tool, arguments], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        found = explain(persona, tool, arguments)
        vectors.append(
            {
                "id": f"v{len(vectors) + 1}",
                "source": source,
                "tool": tool,
                "arguments": arguments,
                "expect": {"verdict": found.verdict, "rule": rule_of(found)},
            }
        )
    return {
        "format": FORMAT,
        "persona": str(persona.uuid),
        "generation": stamp.generation,
        "stamp_sha256": stamp.stamp_hash,
        "vectors": vectors,
    }


def replay(persona: Persona, document: Any, *, under: ActiveStamp | None = None) -> Replay:
    """Each vector explained against the persona's current grant, or against `under`, a stamp
    composed and not written (what_a_proposal_changes)."""
    vectors = _vectors(document)
    _stamp(persona)
    changed = []
    for vector in vectors:
        found = explain(persona, vector["tool"], vector["arguments"], under=under)
        expected = vector["expect"]
        now = {"verdict": found.verdict, "rule": rule_of(found)}
        if now != expected:
            changed.append(
                Changed(
                    id=vector["id"],
                    tool=vector["tool"],
                    arguments=vector["arguments"],
                    expected=f"{expected['verdict']} ({expected['rule']})",
                    now=f"{now['verdict']} ({now['rule']})",
                )
            )
    return Replay(total=len(vectors), changed=changed)


def what_a_proposal_changes(persona: Persona, proposed: Generation) -> Replay | None:
    """Which of the persona's vectors the unsaved generation `proposed` (the one a pending grant
    proposal would make, personas.services.proposal_next_generation) would decide otherwise:
    the vectors of its current grant, as `virgo stamp vectors` exports them, replayed against
    the stamp the factory would compose for `proposed`. Nothing is written: the stamp is
    composed in memory and decided under as a dry run. None when the proposed generation would
    not stand (the diff page says why); PersonaUnexplainable when the persona has no current
    grant to draw vectors from (a draft, a revoked or quarantined persona)."""
    document = next_stamp(proposed)
    if document is None:
        return None
    under = composed_stamp(persona, proposed.number, document)
    return replay(persona, export(persona), under=under)


def rule_of(found: Explanation) -> str:
    """What decided it: the rule's id, or for a refusal before any rule, its code."""
    return str(found.rule.get("id") or found.code)


def _stamp(persona: Persona) -> ActiveStamp:
    try:
        return load_active_stamp(persona, dry_run=True)
    except StampUnavailable as exc:
        raise PersonaUnexplainable(exc.reason) from None


def _calls(persona: Persona, stamp: ActiveStamp) -> list[tuple[str, str, dict[str, Any]]]:
    calls = []
    for name in sorted(stamp.tools):
        tool = stamp.tools[name]
        arguments = {param.name: _sample(param) for param in _params(tool.action) if param.required}
        calls.append((f"tool {name}: its declared arguments", name, arguments))
        calls.append(
            (
                f"tool {name}: in a workspace it is not bound to",
                name,
                {**arguments, "workspace": ELSEWHERE},
            )
        )
    for rule in RULES:
        for example in rule.match:
            calls.append(
                (f"rule {rule.id}: an example it matches", example.tool, _own(example, persona))
            )
        for example in rule.not_match:
            if example.tool in stamp.tools:
                calls.append(
                    (
                        f"rule {rule.id}: a neighbour it leaves alone",
                        example.tool,
                        _own(example, persona),
                    )
                )
    return calls


def _params(action: str) -> tuple[Param, ...]:
    if action in TOOL_ARGUMENTS:
        return tuple(TOOL_ARGUMENTS[action])
    implementation = HANDLERS.implementation(action)
    return implementation.params if isinstance(implementation, Tool) else ()


def _sample(param: Param) -> Any:
    """A value the argument's parser accepts, by its kind; a path is the standard surface's
    QUEUE.md, which every persona may write."""
    if isinstance(param, Choice):
        return param.options[0]
    if isinstance(param, Integer):
        return max(param.minimum, 1)
    if isinstance(param, Id):
        return _UUID
    if isinstance(param, Strings | Records):
        return []
    if isinstance(param, Object):
        return {}
    return "QUEUE.md" if param.name == "path" else "example"


def _own(example: Example, persona: Persona) -> dict[str, Any]:
    """A table example as this persona would make it: its uuid in place of the example's."""
    return json.loads(json.dumps(example.arguments).replace(EXAMPLE_PERSONA, str(persona.uuid)))


def _vectors(document: Any) -> list[dict[str, Any]]:
    """The vectors of a document, each checked for the fields a replay reads."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise MalformedVectors(f"not a vectors document: its format must be {FORMAT!r}")
    vectors = document.get("vectors")
    if not isinstance(vectors, list):
        raise MalformedVectors("`vectors` must be a list")
    for index, vector in enumerate(vectors):
        where = f"vector {index + 1}"
        if not isinstance(vector, dict):
            raise MalformedVectors(f"{where} is not an object")
        if not isinstance(vector.get("id"), str) or not isinstance(vector.get("tool"), str):
            raise MalformedVectors(f"{where} needs a string `id` and `tool`")
        if not isinstance(vector.get("arguments"), dict):
            raise MalformedVectors(f"{where} ({vector['id']}): `arguments` must be an object")
        expect = vector.get("expect")
        if not (
            isinstance(expect, dict)
            and set(expect) == {"verdict", "rule"}
            and all(isinstance(value, str) for value in expect.values())
        ):
            raise MalformedVectors(
                f'{where} ({vector["id"]}): `expect` must be {{"verdict": ..., "rule": ...}}'
            )
    return vectors
