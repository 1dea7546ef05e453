"""What the grant review page shows of a proposal's diff (stamps.grant.compare): only what
changes, in the owner's words, personas by name (VX-OPS-11)."""

import re
from typing import Any

from personas.models import Persona

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

# (key, label, list in the diff) of each row that lists names: shown only when not empty.
_LISTS = (
    ("tools-added", "Tools added", "tools_added"),
    ("tools-removed", "Tools removed", "tools_removed"),
    ("skills-added", "Skills that would appear on the card", "skills_added"),
    ("skills-removed", "Skills that would leave the card", "skills_removed"),
    ("queues-added", "Queues added", "queues_added"),
    ("queues-removed", "Queues removed", "queues_removed"),
    ("bindings-added", "Human-surface bindings added", "bindings_added"),
    ("bindings-removed", "Human-surface bindings removed", "bindings_removed"),
    ("paths-added", "Writable paths added", "paths_added"),
    ("paths-removed", "Writable paths removed", "paths_removed"),
    ("ask-first-added", "Ask first, added", "ask_first_added"),
    ("ask-first-removed", "Ask first, removed", "ask_first_removed"),
)


def named(text: str, owner_id: int) -> str:
    """`text` with each uuid of one of the owner's personas replaced by that persona's name."""
    return naming([text], owner_id)[0]


def naming(texts: list[str], owner_id: int) -> list[str]:
    """`named` for each of `texts`, with one query for them all."""
    names = _persona_names(texts, owner_id)
    return [_with_names(text, names) for text in texts]


def widening_reasons(diff: dict[str, Any], owner_id: int) -> list[str]:
    """Why the proposal waits, a reason a line, personas by name."""
    return naming(list(diff.get("widening", [])), owner_id)


def widening_reasons_of(diffs: dict[int, dict[str, Any]], owner_id: int) -> dict[int, list[str]]:
    """`widening_reasons` of each diff (by key, e.g. a proposal's pk), with one query for all."""
    names = _persona_names(
        [text for diff in diffs.values() for text in diff.get("widening", [])], owner_id
    )
    return {
        key: [_with_names(text, names) for text in diff.get("widening", [])]
        for key, diff in diffs.items()
    }


def _persona_names(texts: list[str], owner_id: int) -> dict[str, str]:
    """The name of each of the owner's personas whose uuid `texts` hold, by that uuid."""
    uuids = {uuid for text in texts for uuid in _UUID.findall(text)}
    if not uuids:
        return {}
    found = Persona.objects.filter(agent__owner_id=owner_id, uuid__in=uuids).values_list(
        "uuid", "name"
    )
    return {str(uuid): name for uuid, name in found}


def _with_names(text: str, names: dict[str, str]) -> str:
    return _UUID.sub(lambda found: names.get(found[0], found[0]), text)


def _place(scope: dict[str, Any] | None) -> str:
    if scope is None:
        return "nothing"
    project = scope["project"] or "all projects"
    return f"{scope['workspace']} / {project} / {scope['graph_namespace']}"


def changed_rows(diff: dict[str, Any], owner_id: int) -> list[dict[str, str]]:
    """One row per thing that changes: {key, label, value}; nothing for what stays as it is."""
    rows = [
        {"key": key, "label": label, "value": ", ".join(diff[field])}
        for key, label, field in _LISTS
        if diff.get(field)
    ]
    access = diff.get("access_changed") or []
    if access:
        value = "; ".join(f"{c['tool']}: {c['from']} → {c['to']}" for c in access)
        rows.append({"key": "access", "label": "Access changed", "value": value})
    lifted = diff.get("conditions_lifted") or []
    if lifted:
        value = "; ".join(f"{c['tool']}: {c['condition']}" for c in lifted)
        rows.append({"key": "conditions", "label": "Conditions lifted", "value": value})
    scope = diff.get("scope") or {}
    if _place(scope.get("from")) != _place(scope.get("to")):
        rows.append(
            {
                "key": "scope",
                "label": "Workspace, project and graph namespace",
                "value": f"{_place(scope.get('from'))} → {_place(scope.get('to'))}",
            }
        )
    authority = diff.get("authority") or {}
    if authority.get("from") != authority.get("to"):
        before = named(authority.get("from") or "nobody", owner_id)
        after = named(authority.get("to") or "nobody", owner_id)
        rows.append(
            {
                "key": "authority",
                "label": "Who confirms its ask-first calls",
                "value": f"{before} → {after}",
            }
        )
    return rows
