"""The grant: everything one stamp lets a persona reach or do, normalised once.

A stamp says what a persona may do in several places: its tools with their access, conditions
and per-tool scope, its queues, human-surface bindings, workspace and writable paths, its graph
namespace and who confirms its ask-first calls. `grant_of` reads all of them into one `Grant`,
and everything that judges or pins a grant uses that object and nothing else: the widening
decision and the diff the owner reviews (`compare`, through stamps.review), the digest a peer
pins from the card (`digest`), the admin's and the API's view of a change.

`GRANT_FIELDS` and `NOT_GRANT` between them name every field of the stamp schema; a test walks
the schema and fails on a field named by neither, so a field the stamp gains later cannot
escape review or the pin by being forgotten here.
"""

import hashlib
import hmac
from dataclasses import dataclass, fields
from typing import Any

import orjson

from personas.catalogue import VERBS_BY_NAME
from stamps import profiles
from virgo.canonical import stamp_bytes

# Named on the card beside the digest, so a peer knows what a changed digest can mean. The
# first definition (no name on the card) covered the tools and their access only; the second
# everything below but the address's role, which every message the persona sends names.
GRANT_DEFINITION = "virgo-grant/3"

OWNER = "owner"

# Where each scope-bearing field of the stamp (schema v3, dotted, `tools[]` for each tool) lives
# in the grant.
GRANT_FIELDS: dict[str, str] = {
    "persona.class": "persona_class",
    "hierarchy.role": "role",
    "bindings.workspace.workspace": "workspace",
    "bindings.workspace.project": "project",
    "bindings.workspace.mutable_paths": "writable_paths",
    "bindings.graph_namespace": "graph_namespace",
    "bindings.human_surfaces": "human_surfaces",
    "bindings.queues": "queues",
    "authority.human.owner": "authority",
    "authority.human.channel": "authority",
    "authority.owning_lead": "authority",
    "tools[].name": "tools",
    "tools[].handler_action": "tools",
    "tools[].access": "tools",
    "tools[].boundary": "tools",
    "tools[].scope.workspace": "tools",
    "tools[].scope.project": "tools",
    "tools[].scope.queues": "tools",
    "tools[].scope.paths": "tools",
    "tools[].scope.surfaces": "tools",
    "tools[].scope.condition": "tools",
}

# The fields that are not grant, and why.
NOT_GRANT: dict[str, str] = {
    "schema_version": "the stamp's format",
    "persona.id": "whose stamp it is; the digest is keyed per persona already",
    "persona.name": "a label",
    "persona.generation": "a counter: a new generation may grant exactly the same",
    "base_composition_hash": "covers the prompt and the card's words too; the stamp hash pins it",
    "hierarchy.path": "the registered address: attribution; what it reaches is the bindings",
    "hierarchy.level": "derived from the address, as above",
    "hierarchy.workspace": "attribution; the workspace reached is bindings.workspace",
    "hierarchy.project": "attribution; the project reached is bindings.workspace.project",
}


@dataclass(frozen=True, slots=True)
class ToolGrant:
    name: str
    handler_action: str
    access: str
    boundary: str | None
    condition: str | None
    workspace: str
    project: str | None
    queues: tuple[str, ...]
    paths: tuple[str, ...]
    surfaces: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Grant:
    persona_class: str
    tools: tuple[ToolGrant, ...]
    workspace: str
    project: str | None
    writable_paths: tuple[str, ...]
    graph_namespace: str
    human_surfaces: tuple[str, ...]
    queues: tuple[str, ...]
    authority: str
    owner: str
    channel: str
    ask_first: tuple[str, ...]
    # What the persona is called in every message it sends and every peer's view of it: a lead
    # is listened to as a lead (VX-GRANT-5).
    role: str = ""

    def as_json(self) -> dict[str, Any]:
        """dataclasses.asdict's result (tuples kept), without its deep copy of every value:
        every value is a string, None or a tuple of strings, which nothing can change."""
        document = {name: getattr(self, name) for name in _GRANT_FIELDS}
        document["tools"] = tuple(
            {name: getattr(tool, name) for name in _TOOL_FIELDS} for tool in self.tools
        )
        return document


_GRANT_FIELDS = tuple(field.name for field in fields(Grant))
_TOOL_FIELDS = tuple(field.name for field in fields(ToolGrant))


def _names(value: Any) -> tuple[str, ...]:
    return tuple(sorted(str(item) for item in value or ()))


def _tool(tool: dict[str, Any]) -> ToolGrant:
    scope = tool.get("scope") or {}
    return ToolGrant(
        name=str(tool["name"]),
        handler_action=str(tool["handler_action"]),
        access=str(tool["access"]),
        boundary=tool.get("boundary"),
        condition=scope.get("condition"),
        workspace=str(scope.get("workspace", "")),
        project=scope.get("project"),
        queues=_names(scope.get("queues")),
        paths=_names(scope.get("paths")),
        surfaces=_names(scope.get("surfaces")),
    )


def _ask_first(persona_class: str, tools: tuple[ToolGrant, ...]) -> tuple[str, ...]:
    """Tools stamped `confirm` that the class matrix would allow: the owner's ask-first verbs."""
    return tuple(
        tool.name
        for tool in tools
        if tool.access == "confirm"
        and tool.name in VERBS_BY_NAME
        and profiles.access_for(persona_class, tool.name) == "allow"
    )


# Distinct (class, tool list) pairs whose tool grants are kept: a fan-out's personas made alike
# share them, and a fleet of all-different ones keeps constant memory.
_TOOL_GRANTS_KEPT = 4096
_tool_grants: dict[tuple[str, bytes], tuple[tuple[ToolGrant, ...], tuple[str, ...]]] = {}


def _tool_grants_of(
    persona_class: str, tools: list[dict[str, Any]]
) -> tuple[tuple[ToolGrant, ...], tuple[str, ...]]:
    """The tool grants of a stamp's tools, sorted by name, and its ask-first verbs: a function
    of the class and the tools alone (the class matrix is the code's), worked out once for every
    stamp that carries the same tools. What is kept is immutable, so sharing it is safe."""
    key = (persona_class, orjson.dumps(tools))
    found = _tool_grants.get(key)
    if found is None:
        granted = tuple(sorted((_tool(tool) for tool in tools), key=lambda t: t.name))
        found = (granted, _ask_first(persona_class, granted))
        if len(_tool_grants) >= _TOOL_GRANTS_KEPT:
            _tool_grants.pop(next(iter(_tool_grants)), None)
        _tool_grants[key] = found
    return found


def grant_of(document: dict[str, Any]) -> Grant:
    """The grant of a validated v3 stamp document."""
    bindings = document["bindings"]
    workspace = bindings["workspace"]
    authority = document["authority"]
    persona_class = str(document["persona"]["class"])
    tools, ask_first = _tool_grants_of(persona_class, document["tools"])
    lead = authority.get("owning_lead")
    return Grant(
        persona_class=persona_class,
        tools=tools,
        workspace=str(workspace["workspace"]),
        project=workspace.get("project"),
        writable_paths=_names(workspace.get("mutable_paths")),
        graph_namespace=str(bindings["graph_namespace"]),
        human_surfaces=_names(bindings.get("human_surfaces")),
        queues=_names(bindings.get("queues")),
        authority=f"lead:{lead}" if lead else OWNER,
        owner=str(authority["human"]["owner"]),
        channel=str(authority["human"]["channel"]),
        ask_first=ask_first,
        role=str(document["hierarchy"]["role"]),
    )


def digest(grant: Grant, *, salt: str) -> str:
    """What a peer pins of a persona's grant (VX-TRUST-4, VX-GRANT-3): HMAC-SHA256, keyed by the
    persona's owner-private salt, over the RFC 8785 form of the whole grant.

    Keyed, because the grants a class can have are few enough to try every one against a bare
    hash. It changes whenever anything the persona may reach or do changes, and with nothing else.
    """
    return hmac.new(bytes.fromhex(salt), digest_message(grant), hashlib.sha256).hexdigest()


def digest_message(grant: Grant) -> bytes:
    """The RFC 8785 bytes a digest covers. A grant holds only ASCII field names, strings, None
    and tuples of strings, read out of a stamp that passed its schema, so it needs none of
    canonical_bytes's checks (stamp_bytes; tests/test_stamp_fast_paths.py holds them equal)."""
    return stamp_bytes({"definition": GRANT_DEFINITION, "grant": grant.as_json()})


# Comparing two grants ---------------------------------------------------------------------------


def _added_removed(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[list[str], list[str]]:
    return sorted(set(after) - set(before)), sorted(set(before) - set(after))


def namespace_widening(before: str, after: str) -> str | None:
    """How `after` reaches past `before`: `above` it (wider), `beside` it (elsewhere), or None
    when it is the same namespace or one below it (narrower)."""
    if after == before or after.startswith(f"{before}/"):
        return None
    return "above" if before.startswith(f"{after}/") else "beside"


def _authority_label(authority: str) -> str:
    return "the human owner" if authority == OWNER else f"owning lead {authority.split(':', 1)[1]}"


def _place_widening(
    old_workspace: str, old_project: str | None, new_workspace: str, new_project: str | None
) -> str | None:
    """Another workspace, another project, or the whole workspace instead of one project widens;
    one project of the same workspace instead of all of it narrows."""
    if new_workspace != old_workspace:
        return f"moves to workspace {new_workspace} from {old_workspace}"
    if new_project == old_project or old_project is None:
        return None
    if new_project is None:
        return f"reaches all of workspace {new_workspace}, not project {old_project}"
    return f"moves to project {new_project} from {old_project}"


def _scope_widening(before: Grant, after: Grant) -> list[str]:
    """The persona's own scope: its workspace, project and graph namespace."""
    place = _place_widening(before.workspace, before.project, after.workspace, after.project)
    widening = [place] if place else []
    relation = namespace_widening(before.graph_namespace, after.graph_namespace)
    if relation is not None:
        widening.append(
            f"graph namespace {after.graph_namespace} is {relation} {before.graph_namespace}"
        )
    return widening


def _authority_widening(before: Grant, after: Grant) -> list[str]:
    """Who confirms: moving it to a persona, or from one persona to another, widens; moving it
    back to the same human owner through the same channel narrows (a human decides again)."""
    old = (before.authority, before.owner, before.channel)
    new = (after.authority, after.owner, after.channel)
    if new == old or new == (OWNER, before.owner, before.channel):
        return []
    return [
        f"confirmations move to {_authority_label(after.authority)} "
        f"from {_authority_label(before.authority)}"
    ]


def _tool_widening(old: ToolGrant, new: ToolGrant, *, already: dict[str, set[str]]) -> list[str]:
    """One kept tool's own widening; `already` holds what the persona-wide changes name (a queue
    added reaches every queue tool), so each is said once."""
    widening = []
    if old.access == "confirm" and new.access == "allow":
        widening.append(f"{new.name}: confirm becomes allow")
    if old.condition and new.condition != old.condition:
        widening.append(f"{new.name}: lifts condition {old.condition}")
    if old.boundary and new.boundary != old.boundary:
        widening.append(f"{new.name}: no longer crosses boundary {old.boundary}")
    if new.handler_action != old.handler_action:
        widening.append(f"{new.name}: runs as {new.handler_action}, not {old.handler_action}")
    place = _place_widening(old.workspace, old.project, new.workspace, new.project)
    if place and place not in already["scope"]:
        widening.append(f"{new.name}: {place}")
    for field in ("queues", "paths", "surfaces"):
        added = sorted(set(getattr(new, field)) - set(getattr(old, field)) - already[field])
        if added:
            widening.append(f"{new.name}: adds {field} {', '.join(added)}")
    return widening


def _tools_widening(added: list[str]) -> list[str]:
    """The tools a change adds, as one reason (a first grant adds every tool of its class)."""
    if len(added) > 1:
        return [f"adds {len(added)} tools: {', '.join(added)}"]
    return [f"adds tool {name}" for name in added]


def compare(before: Grant | None, after: Grant | None) -> dict[str, Any]:
    """What changes from `before` to `after`, and each way in which it widens.

    None grants nothing: a generation that does not stand. Widening is anything that lets the
    persona reach or do more (VX-GRANT-2); the rest narrows or touches no grant.
    """
    empty = Grant("", (), "", None, (), "", (), (), OWNER, "", "", ())
    old_grant, new_grant = before or empty, after or empty
    old = {tool.name: tool for tool in old_grant.tools}
    new = {tool.name: tool for tool in new_grant.tools}
    tools_added, tools_removed = _added_removed(tuple(old), tuple(new))
    access = [
        {"tool": name, "from": old[name].access, "to": tool.access}
        for name, tool in new.items()
        if name in old and old[name].access != tool.access
    ]
    lifted = [
        {"tool": name, "condition": old[name].condition}
        for name, tool in new.items()
        if name in old and old[name].condition and tool.condition != old[name].condition
    ]
    queues = _added_removed(old_grant.queues, new_grant.queues)
    surfaces = _added_removed(old_grant.human_surfaces, new_grant.human_surfaces)
    paths = _added_removed(old_grant.writable_paths, new_grant.writable_paths)
    ask_first = _added_removed(old_grant.ask_first, new_grant.ask_first)
    widening = _tools_widening(tools_added)
    if before is not None and after is not None:
        scope = _scope_widening(before, after)
        already = {
            "scope": set(scope),
            "queues": set(queues[0]),
            "paths": set(paths[0]),
            "surfaces": set(surfaces[0]),
        }
        for name in sorted(set(old) & set(new)):
            widening.extend(_tool_widening(old[name], new[name], already=already))
        widening.extend(scope)
        widening.extend(_authority_widening(before, after))
        if before.role != after.role:
            widening.append(
                f"its role changes from {before.role} to {after.role}: the name every message "
                "of its carries"
            )
    widening.extend(
        [
            *(f"adds queue {name}" for name in queues[0]),
            *(f"adds human-surface binding {name}" for name in surfaces[0]),
            *(f"adds writable path {name}" for name in paths[0]),
            *(f"{name}: no longer asks first" for name in ask_first[1] if name in new),
        ]
    )
    if after is None:
        widening = []
    return {
        "widens": bool(widening),
        "widening": list(dict.fromkeys(widening)),
        "tools_added": tools_added,
        "tools_removed": tools_removed,
        "access_changed": access,
        "conditions_lifted": lifted,
        "queues_added": queues[0],
        "queues_removed": queues[1],
        "bindings_added": surfaces[0],
        "bindings_removed": surfaces[1],
        "paths_added": paths[0],
        "paths_removed": paths[1],
        "ask_first_added": ask_first[0],
        "ask_first_removed": ask_first[1],
        "scope": {
            "from": _scope_of(before),
            "to": _scope_of(after),
        },
        "authority": {
            "from": _authority_label(before.authority) if before else None,
            "to": _authority_label(after.authority) if after else None,
        },
        "grant_definition": GRANT_DEFINITION,
    }


def _scope_of(grant: Grant | None) -> dict[str, Any] | None:
    if grant is None:
        return None
    return {
        "workspace": grant.workspace,
        "project": grant.project,
        "graph_namespace": grant.graph_namespace,
        "role": grant.role,
    }


# What a class may have --------------------------------------------------------------------------


def class_refusals(persona_class: str) -> dict[str, str]:
    """Each catalogue verb a persona of this class may not have, with the reason: the factory's
    own rule (profiles.class_may_have), so a form offers exactly what would stand."""
    refusals = {}
    for name, verb in VERBS_BY_NAME.items():
        if profiles.class_may_have(persona_class, name):
            continue
        if verb.boundary is not None and verb.boundary.is_deny:
            refusals[name] = f"crosses the deny boundary {verb.boundary.value}: never exposed"
        else:
            cell = profiles.verb_cell(persona_class, verb)
            refusals[name] = (
                f"a {persona_class} may not have it: '{verb.bundle.value}' is '{cell.label}'"
            )
    return refusals
