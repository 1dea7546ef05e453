"""The grant diff of a persona change: what its next stamp would grant beside its current one.

personas.services calls `grant_diff` by the name settings.VIRGO_GRANT_DIFF gives, so the records
never import the stamp rules: a change whose diff `widens` waits for the owner's approval as a
GrantProposal, one that only narrows is made at once. The would-be stamp is composed by the same
pure factory the build uses, from the unsaved next generation, and never written.
"""

import json
from typing import Any

from personas.models import Generation
from stamps.factory import build_stamp
from stamps.models import CapabilityStamp
from stamps.problems import StampRejected
from stamps.services import stamp_inputs
from virgo.canonical import sha256_hex, stamp_bytes


def _stamp_of(generation: Generation) -> tuple[dict[str, Any] | None, str, list[str]]:
    """The stamp a generation grants (None if it does not stand), its hash, and why not."""
    if generation.pk is not None:
        if generation.standing is False:
            return None, "", list(generation.not_standing_reasons)
        stored = CapabilityStamp.objects.filter(generation=generation).first()
        if stored is not None:
            return json.loads(stored.data), stored.stamp_hash, []
    try:
        document = build_stamp(**stamp_inputs(generation))
    except StampRejected as rejected:
        return None, "", [problem.message for problem in rejected.problems]
    return document, sha256_hex(stamp_bytes(document)), []


def _tools(document: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in (document or {}).get("tools", [])}


def _binding(document: dict[str, Any] | None, *keys: str) -> set[str]:
    value: Any = (document or {}).get("bindings", {})
    for key in keys:
        value = value.get(key, {})
    return set(value or [])


def _added_removed(before: set[str], after: set[str]) -> tuple[list[str], list[str]]:
    return sorted(after - before), sorted(before - after)


def _skill_ids(generation: Generation | None) -> set[str]:
    if generation is None:
        return set()
    return {skill["id"] for skill in generation.composition.get("skills", [])}


def grant_diff(*, current: Generation | None, proposed: Generation) -> dict[str, Any]:
    """What the proposed generation would grant beside what the current one grants.

    A generation that does not stand grants nothing (the runtime refuses it, its card is not
    advertised), so a change that would not stand never widens. It widens when its stamp would
    add a tool, turn a tool's `confirm` into `allow`, lift a tool's class condition, or add a
    queue, a human-surface binding or a writable workspace path.
    """
    before, current_hash, _ = _stamp_of(current) if current is not None else (None, "", [])
    after, next_hash, problems = _stamp_of(proposed)
    old, new = _tools(before), _tools(after)
    tools_added, tools_removed = _added_removed(set(old), set(new))
    access = [
        {"tool": name, "from": old[name]["access"], "to": tool["access"]}
        for name, tool in new.items()
        if name in old and old[name]["access"] != tool["access"]
    ]
    lifted = [
        {"tool": name, "condition": old[name]["scope"]["condition"]}
        for name, tool in new.items()
        if name in old and old[name]["scope"]["condition"] and not tool["scope"]["condition"]
    ]
    queues = _added_removed(_binding(before, "queues"), _binding(after, "queues"))
    surfaces = _added_removed(_binding(before, "human_surfaces"), _binding(after, "human_surfaces"))
    paths = _added_removed(
        _binding(before, "workspace", "mutable_paths"),
        _binding(after, "workspace", "mutable_paths"),
    )
    skills = _added_removed(_skill_ids(current), _skill_ids(proposed))
    widening = [
        *(f"adds tool {name}" for name in tools_added),
        *(f"{c['tool']}: confirm becomes allow" for c in access if c["to"] == "allow"),
        *(f"{c['tool']}: lifts condition {c['condition']}" for c in lifted),
        *(f"adds queue {name}" for name in queues[0]),
        *(f"adds human-surface binding {name}" for name in surfaces[0]),
        *(f"adds writable path {name}" for name in paths[0]),
    ]
    return {
        "widens": bool(widening),
        "widening": widening,
        "tools_added": tools_added,
        "tools_removed": tools_removed,
        "access_changed": access,
        "conditions_lifted": lifted,
        "skills_added": skills[0],
        "skills_removed": skills[1],
        "queues_added": queues[0],
        "queues_removed": queues[1],
        "bindings_added": surfaces[0],
        "bindings_removed": surfaces[1],
        "paths_added": paths[0],
        "paths_removed": paths[1],
        "current_generation": current.number if current is not None else None,
        "next_generation": proposed.number,
        "current_stamp_hash": current_hash,
        "next_stamp_hash": next_hash,
        "next_stands": after is not None,
        "next_problems": problems,
    }
