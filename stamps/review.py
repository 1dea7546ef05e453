"""The grant diff of a persona change: what its next stamp would grant beside its current one.

personas.services calls `grant_diff` by the name settings.VIRGO_GRANT_DIFF gives, so the records
never import the stamp rules: a change whose diff `widens` waits for the owner's approval as a
GrantProposal, one that only narrows is made at once, and one whose diff `refuses` is not made
at all (it would leave the persona unable to stand). The would-be stamp is composed by the same
pure factory the build uses, from the unsaved next generation, and never written. Both sides are
read into stamps.grant's one `Grant`, which alone decides what widens.
"""

import json
from typing import Any

from personas.models import Generation
from stamps.factory import SCHEMA_VERSION, build_stamp
from stamps.grant import Grant, compare, grant_of
from stamps.models import CapabilityStamp
from stamps.problems import Code, Problem, StampRejected
from stamps.services import stamp_inputs
from virgo.canonical import sha256_hex, stamp_bytes


def _built(generation: Generation) -> tuple[dict[str, Any] | None, list[Problem]]:
    try:
        return build_stamp(**stamp_inputs(generation)), []
    except StampRejected as rejected:
        return None, rejected.problems


def next_stamp(generation: Generation) -> dict[str, Any] | None:
    """The stamp an unsaved generation would have, composed by the build's own pure factory
    and never written; None if the factory would reject it (it would not stand)."""
    return _built(generation)[0]


def _stored(generation: Generation) -> tuple[dict[str, Any], str] | None:
    stored = CapabilityStamp.objects.filter(generation=generation).first()
    if stored is None or stored.schema_version != SCHEMA_VERSION:
        return None
    return json.loads(stored.data), stored.stamp_hash


def _judged_against(current: Generation) -> tuple[Grant | None, str, Generation | None]:
    """What a change is judged against: the current generation's grant if it stands (or would,
    its stamp still owed), else the last earlier generation that stood (what the persona was
    last allowed to do), else nothing."""
    grant, stamp_hash = _grant(current)
    if grant is not None:
        return grant, stamp_hash, current
    earlier = (
        Generation.objects.filter(persona_id=current.persona_id, number__lt=current.number)
        .filter(standing=True)
        .order_by("-number")
        .first()
    )
    grant, stamp_hash = _grant(earlier)
    return grant, stamp_hash, earlier if grant is not None else None


def _grant(generation: Generation | None) -> tuple[Grant | None, str]:
    """What a saved generation grants (None if it does not stand) and its stamp's hash. A
    revoked generation never stands (a database constraint), so `standing` says it all."""
    if generation is None or generation.standing is False:
        return None, ""
    stored = _stored(generation)
    if stored is not None:
        return grant_of(stored[0]), stored[1]
    document, _ = _built(generation)
    if document is None:
        return None, ""
    return grant_of(document), sha256_hex(stamp_bytes(document))


def field_of(problem: Problem) -> str:
    """The persona field a stamp problem is about, so a refusal can name it. The records check
    the class, the ask-first verbs, bindings and lead before the factory is asked, so what is
    left for it to reject is the address (one the class may not take) or the verb subset."""
    return "address" if problem.code is Code.ADDRESS else "verb_subset"


def _refusals(
    current: Generation | None, proposed: Generation, problems: list[Problem]
) -> dict[str, list[str]]:
    """The problems of the proposed stamp that the current one does not already have, by field:
    a write may not leave a persona unable to stand (VX-GRANT-4), but one that leaves an already
    broken persona no worse (a rename while its agent's grant is short) is not refused for it."""
    known: set[tuple[str, str]] = set()
    if current is not None and current.standing is not True:
        known = {(p.code, p.item) for p in _built(current)[1]}
    refusals: dict[str, list[str]] = {}
    missing = []
    for problem in problems:
        if problem.code is Code.FILE_CONFLICT or (problem.code, problem.item) in known:
            continue
        if problem.code is Code.MISSING_TOOL:
            missing.append(problem.item)
            continue
        field = field_of(problem)
        refusals.setdefault(field, []).append(problem.message)
    if missing:
        persona_class = proposed.composition["persona_class"]
        refusals.setdefault("verb_subset", []).insert(
            0, f"missing tools a {persona_class} needs: {', '.join(missing)}"
        )
    return refusals


def grant_diff(*, current: Generation | None, proposed: Generation) -> dict[str, Any]:
    """What the proposed generation would grant beside what the persona may do now.

    `current` is the persona's current generation (None for a new persona). When it does not
    stand, the change is judged against the last generation that stood, so removing the verb
    that broke a persona narrows and applies at once. A change that would not stand widens
    nothing; `refuses` names, by field, what the write would break that was not already broken.
    """
    old, current_hash, before = (
        _judged_against(current) if current is not None else (None, "", None)
    )
    document, problems = _built(proposed)
    new = grant_of(document) if document is not None else None
    diff = compare(old, new)
    skills = _added_removed(_skill_ids(current), _skill_ids(proposed))
    return {
        **diff,
        "skills_added": skills[0],
        "skills_removed": skills[1],
        "current_generation": current.number if current is not None else None,
        "compared_with_generation": before.number if before is not None else None,
        "next_generation": proposed.number,
        "current_stamp_hash": current_hash,
        "next_stamp_hash": sha256_hex(stamp_bytes(document)) if document is not None else "",
        "next_stands": document is not None,
        "next_problems": [problem.message for problem in problems],
        "refuses": _refusals(current, proposed, problems),
    }


def _added_removed(before: set[str], after: set[str]) -> tuple[list[str], list[str]]:
    return sorted(after - before), sorted(before - after)


def _skill_ids(generation: Generation | None) -> set[str]:
    if generation is None:
        return set()
    return {skill["id"] for skill in generation.composition["skills"]}
