"""The stamp factory: one persona generation's inputs -> one validated v3 stamp.

`build_stamp` is pure: it reads no database, writes no file and has no default address. Its
caller (stamps.services) takes every input from the generation's immutable composition, so a
generation always yields the same stamp, byte for byte.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from personas.addresses import address_problem
from personas.catalogue import VERBS, VERBS_BY_NAME, Mode, Verb
from stamps import profiles
from stamps.problems import Code, Problem, StampRejected
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.validation import Verdicts, hierarchy_of, validate_stamp

SCHEMA_VERSION = 3
HUMAN_CHANNEL = "virgo-channel"
# The handler namespace of the workspace file tools, the only tools scoped by paths.
WORKSPACE_NAMESPACE = "workspace"


@dataclass(frozen=True, slots=True)
class PersonaIdentity:
    """Who the stamp is for, and whom its confirmations are routed to."""

    id: str
    name: str
    generation: int
    owner: str
    owning_lead: str | None = None


@dataclass(frozen=True, slots=True)
class WorkspaceBinding:
    workspace: str
    project: str | None
    mutable_paths: tuple[str, ...]


def workspace_binding_for(*, address: str, persona_class: str) -> WorkspaceBinding:
    """The workspace binding a registered address gives a persona of this class."""
    hierarchy = hierarchy_of(address)
    return WorkspaceBinding(
        workspace=hierarchy["workspace"],
        project=hierarchy["project"],
        mutable_paths=profiles.mutable_paths(persona_class, hierarchy["project"]),
    )


def build_stamp(
    *,
    persona: PersonaIdentity,
    base_composition_hash: str,
    address: str,
    persona_class: str,
    graph_namespace: str,
    human_surface_bindings: Sequence[str],
    workspace: WorkspaceBinding,
    verb_subset: Sequence[str],
    queues: Sequence[str],
    ask_first_verbs: Sequence[str],
    registry: HandlerRegistry = HANDLERS,
    verdicts: Verdicts | None = None,
) -> dict[str, Any]:
    """Resolve the class profile and the persona's path into one validated v3 stamp.

    The tools are exactly the verb subset (the persona's tool grant), in catalogue order; the
    owner's "ask first" verbs among them are stamped `access: confirm` whatever the class
    matrix says. The stamp is returned only if it passes the JSON Schema and the semantic
    validator; otherwise StampRejected lists every problem. There is no address default:
    without a canonical address nothing is built. `verdicts` shares the semantic validator's
    verdict across a batch (stamps.validation.Verdicts).
    """
    problem = address_problem(address)
    if problem:
        raise StampRejected([Problem(Code.ADDRESS, str(address), problem)])
    if persona_class not in profiles.CLASSES:
        raise StampRejected(
            [Problem(Code.SCHEMA, "class", f"unknown persona class {persona_class!r}")]
        )
    unknown = [name for name in verb_subset if name not in VERBS_BY_NAME]
    if unknown:
        raise StampRejected(
            [
                Problem(Code.UNKNOWN_TOOL, n, f"tool {n} is not in the verb catalogue")
                for n in unknown
            ]
        )
    outside = [name for name in ask_first_verbs if name not in verb_subset]
    if outside:
        raise StampRejected(
            [
                Problem(Code.SCOPE, n, f"ask-first verb {n} is not in the persona's verb subset")
                for n in outside
            ]
        )
    hierarchy = hierarchy_of(address)
    order = {verb.name: index for index, verb in enumerate(VERBS)}
    ordered = sorted(verb_subset, key=order.__getitem__)
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "persona": {
            "id": persona.id,
            "name": persona.name,
            "class": persona_class,
            "generation": persona.generation,
        },
        "base_composition_hash": base_composition_hash,
        "hierarchy": hierarchy,
        "bindings": {
            "workspace": {
                "workspace": workspace.workspace,
                "project": workspace.project,
                "mutable_paths": list(workspace.mutable_paths),
            },
            "graph_namespace": graph_namespace,
            "human_surfaces": sorted(human_surface_bindings),
            "queues": sorted(queues),
        },
        "authority": {
            "human": {"owner": persona.owner, "channel": HUMAN_CHANNEL},
            "owning_lead": persona.owning_lead,
        },
        "tools": [
            _tool(
                VERBS_BY_NAME[name],
                persona_class=persona_class,
                workspace=workspace,
                human_surface_bindings=human_surface_bindings,
                queues=queues,
                ask_first=name in ask_first_verbs,
            )
            for name in ordered
        ],
    }
    validate_stamp(document, registry=registry, verdicts=verdicts)
    return document


def _tool(
    verb: Verb,
    *,
    persona_class: str,
    workspace: WorkspaceBinding,
    human_surface_bindings: Sequence[str],
    queues: Sequence[str],
    ask_first: bool,
) -> dict[str, Any]:
    cell = profiles.verb_cell(persona_class, verb)
    return {
        "name": verb.name,
        "handler_action": verb.handler_action,
        "access": "confirm" if ask_first else profiles.access_for(persona_class, verb.name),
        "scope": {
            "workspace": workspace.workspace,
            "project": workspace.project,
            "queues": sorted(queues) if verb.bundle in profiles.QUEUE_BUNDLES else [],
            "paths": _paths(verb, workspace),
            "surfaces": sorted(human_surface_bindings)
            if verb.bundle in profiles.HUMAN_SURFACE_BUNDLES
            else [],
            "condition": cell.condition.value if cell.condition else None,
        },
        "boundary": verb.boundary.value if verb.boundary else None,
    }


def _paths(verb: Verb, workspace: WorkspaceBinding) -> list[str]:
    """Workspace file tools read the whole bound workspace and write only its mutable paths."""
    if verb.handler_action.split(".")[0] != WORKSPACE_NAMESPACE:
        return []
    if verb.mode is Mode.READ:
        return [profiles.WHOLE_WORKSPACE]
    return list(workspace.mutable_paths)
