"""Validation of v3 stamps: the JSON Schema, then the semantic validator.

Both run before a stamp is written (the factory) and again on the bytes of every active stamp at
boot (stamps.checks). Each problem names the exact item it is about, so an owner can read in the
admin which tool is missing or which scope is wrong.
"""

import json
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
from jsonschema import Draft202012Validator

from personas.addresses import ROOT_WORKSPACE, address_problem
from personas.catalogue import VERBS_BY_NAME, Mode
from personas.models import PersonaClass
from stamps import profiles
from stamps.problems import Code, Problem, StampRejected
from stamps.projections import name_the_same_tools, projection_problems, projections_of
from stamps.registry import HANDLERS, HandlerRegistry

# Django's `.values` builds a new list on every access; the validator asks per tool.
_CLASSES = frozenset(PersonaClass.values)
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@cache
def schema(version: int) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"capability-stamp-v{version}.schema.json").read_text())


@cache
def _validator(version: int) -> Draft202012Validator:
    document = schema(version)
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


@cache
def _fast(version: int) -> jsonschema_rs.Draft202012Validator:
    """The schema compiled in Rust: ~20x faster than fastjsonschema here, for the common case.

    It only answers "valid"; every problem is still found and worded by jsonschema itself, so
    the messages owners read do not depend on which engine said no.
    """
    return jsonschema_rs.Draft202012Validator(schema(version))


def compile_schema(version: int = 3) -> None:
    """Load and compile the schema for both engines, once per process (the start-up check);
    raises what a broken schema file raises."""
    _fast(version)
    _validator(version)


def schema_valid(document: object, version: int = 3) -> bool:
    """Whether the document passes the schema: schema_problems' first question, alone."""
    return bool(_fast(version).is_valid(document))


def schema_problems(document: object, version: int = 3) -> list[Problem]:
    """Every JSON Schema violation, each naming the JSON path it is at."""
    if schema_valid(document, version):
        return []
    problems = []
    for error in sorted(_validator(version).iter_errors(document), key=lambda e: list(e.path)):
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        problems.append(
            Problem(Code.SCHEMA, where, f"schema v{version}: at {where}: {error.message}")
        )
    return problems


def semantic_problems(
    document: dict[str, Any], *, registry: HandlerRegistry = HANDLERS
) -> list[Problem]:
    """What the schema cannot say: class matrix, boundaries, scope binding, address, projections.

    Expects a document that passed the schema, but never trusts it: a missing part is reported,
    not raised.
    """
    tools: list[dict[str, Any]] = [t for t in document.get("tools", []) if isinstance(t, dict)]
    persona_class = document.get("persona", {}).get("class")
    problems = _address_problems(document, persona_class)
    problems += _duplicate_problems(tools)
    if persona_class in _CLASSES:
        problems += _class_problems(tools, persona_class)
    bound = _BoundScope.of(document)
    for tool in tools:
        problems += _tool_problems(tool, persona_class, bound, registry)
    problems += projection_problems(document)
    return problems


def validate_stamp(
    document: dict[str, Any],
    *,
    registry: HandlerRegistry = HANDLERS,
    verdicts: "Verdicts | None" = None,
) -> None:
    """Raise StampRejected unless the stamp passes the schema and then the semantic validator.

    `verdicts` (made with the same registry) shares the semantic verdict between the stamps of a
    batch whose rule-bearing parts are equal; the schema is asked of every stamp.
    """
    problems = schema_problems(document)
    if not problems:
        if verdicts is None:
            problems = semantic_problems(document, registry=registry)
        else:
            problems = verdicts.of(document)[0]
    if problems:
        raise StampRejected(problems)


# The parts -------------------------------------------------------------------------------------


def hierarchy_of(path: str) -> dict[str, Any]:
    """The root/workspace/project/role parts of a canonical address."""
    segments = path.split("/")
    project = segments[1] if len(segments) == 3 else None
    if segments[0] == ROOT_WORKSPACE:
        level = "root"
    elif project is None:
        level = "workspace"
    else:
        level = "project"
    return {
        "path": path,
        "level": level,
        "workspace": segments[0],
        "project": project,
        "role": segments[-1],
    }


def _address_problems(document: dict[str, Any], persona_class: object) -> list[Problem]:
    hierarchy = document.get("hierarchy", {})
    path = hierarchy.get("path")
    problem = address_problem(path)
    if problem:
        return [Problem(Code.ADDRESS, str(path), f"address is not canonical: {problem}")]
    assert isinstance(path, str)
    problems = []
    if persona_class in _CLASSES:
        class_problem = profiles.address_class_problem(str(persona_class), path)
        if class_problem:
            problems.append(Problem(Code.ADDRESS, path, class_problem))
    expected = hierarchy_of(path)
    for part in ("level", "workspace", "project", "role"):
        if hierarchy.get(part) != expected[part]:
            problems.append(
                Problem(
                    Code.ADDRESS,
                    f"hierarchy.{part}",
                    f"hierarchy.{part} is {hierarchy.get(part)!r} but address {path!r} "
                    f"gives {expected[part]!r}",
                )
            )
    binding = document.get("bindings", {}).get("workspace", {})
    for part in ("workspace", "project"):
        if binding.get(part) != expected[part]:
            problems.append(
                Problem(
                    Code.SCOPE,
                    f"bindings.workspace.{part}",
                    f"workspace binding {part} {binding.get(part)!r} is outside the persona's "
                    f"address {path!r} ({part} {expected[part]!r})",
                )
            )
    return problems


def _duplicate_problems(tools: list[dict[str, Any]]) -> list[Problem]:
    problems = []
    for key, code, label in (
        ("name", Code.DUPLICATE_NAME, "tool name"),
        ("handler_action", Code.DUPLICATE_ACTION, "handler action"),
    ):
        counts = Counter(tool.get(key) for tool in tools)
        for value, count in counts.items():
            if count > 1:
                problems.append(
                    Problem(code, str(value), f"duplicate {label} {value!r} ({count} tools)")
                )
    return problems


def _class_problems(tools: list[dict[str, Any]], persona_class: str) -> list[Problem]:
    names = {tool.get("name") for tool in tools}
    return [
        Problem(Code.MISSING_TOOL, name, f"not standing: missing tool {name}")
        for name in profiles.required_tools(persona_class)
        if name not in names
    ]


def _tool_problems(
    tool: dict[str, Any],
    persona_class: object,
    bound: "_BoundScope",
    registry: HandlerRegistry,
) -> list[Problem]:
    name = str(tool.get("name"))
    action = tool.get("handler_action")
    access = tool.get("access")
    problems = []
    if access not in ("allow", "confirm"):
        problems.append(
            Problem(
                Code.BAD_ACCESS,
                name,
                f"tool {name}: access {access!r} is neither allow nor confirm "
                "(a denied capability is left out, not listed)",
            )
        )
    if not registry.is_registered(str(action)):
        problems.append(
            Problem(
                Code.UNREGISTERED_HANDLER,
                name,
                f"tool {name}: handler action {action!r} has no registered handler",
            )
        )
    verb = VERBS_BY_NAME.get(name)
    if verb is None:
        problems.append(
            Problem(Code.UNKNOWN_TOOL, name, f"tool {name} is not in the verb catalogue")
        )
        return problems
    if action != verb.handler_action:
        problems.append(
            Problem(
                Code.ACTION_MISMATCH,
                name,
                f"tool {name}: handler action {action!r} is not the catalogue's "
                f"{verb.handler_action!r}",
            )
        )
    boundary = verb.boundary.value if verb.boundary else None
    if tool.get("boundary") != boundary:
        problems.append(
            Problem(
                Code.BOUNDARY_MISMATCH,
                name,
                f"tool {name}: boundary {tool.get('boundary')!r} is not the catalogue's "
                f"{boundary!r}",
            )
        )
    if verb.boundary is not None and verb.boundary.is_deny:
        problems.append(
            Problem(
                Code.DENIED_EXPOSED,
                name,
                f"tool {name} crosses the denied {boundary} boundary and must not be exposed",
            )
        )
    elif verb.boundary is not None and access == "allow":
        problems.append(
            Problem(
                Code.BOUNDARY_ALLOW,
                name,
                f"tool {name} crosses the {boundary} boundary: its access must be confirm, "
                "not allow",
            )
        )
    if persona_class not in _CLASSES:
        return problems
    cell = profiles.verb_cell(str(persona_class), verb)
    if not profiles.class_may_have(str(persona_class), name):
        what = "read verbs only" if cell.access is profiles.CellAccess.READ else "not exposed"
        problems.append(
            Problem(
                Code.NOT_IN_CLASS,
                name,
                f"tool {name} is not available to class {persona_class}: "
                f"'{verb.bundle.value}' is '{cell.label}' ({what})",
            )
        )
        return problems
    if cell.access is profiles.CellAccess.CONFIRM and access == "allow" and verb.boundary is None:
        problems.append(
            Problem(
                Code.BOUNDARY_ALLOW,
                name,
                f"tool {name}: '{verb.bundle.value}' is 'C' for {persona_class}: its access "
                "must be confirm, not allow",
            )
        )
    scope = tool.get("scope", {})
    condition = cell.condition.value if cell.condition else None
    if scope.get("condition") != condition:
        problems.append(
            Problem(
                Code.CONDITION,
                name,
                f"tool {name}: condition {scope.get('condition')!r} is not the class matrix's "
                f"{condition!r} for {persona_class}",
            )
        )
    problems += _scope_problems(name, verb.mode, scope, bound)
    return problems


@dataclass(frozen=True, slots=True)
class _BoundScope:
    """What a stamp binds its persona to: every tool's scope must stay inside it.

    Read once per document rather than once per tool.
    """

    workspace: object
    project: object
    queues: frozenset[str]
    surfaces: frozenset[str]
    mutable_paths: frozenset[str]
    readable_paths: frozenset[str]

    @classmethod
    def of(cls, document: dict[str, Any]) -> "_BoundScope":
        hierarchy = document.get("hierarchy", {})
        bindings = document.get("bindings", {})
        mutable = frozenset(bindings.get("workspace", {}).get("mutable_paths", []))
        return cls(
            workspace=hierarchy.get("workspace"),
            project=hierarchy.get("project"),
            queues=frozenset(bindings.get("queues", [])),
            surfaces=frozenset(bindings.get("human_surfaces", [])),
            mutable_paths=mutable,
            readable_paths=mutable | {profiles.WHOLE_WORKSPACE},
        )


def _scope_problems(
    name: str, mode: Mode, scope: dict[str, Any], bound: _BoundScope
) -> list[Problem]:
    problems = []
    for part, expected in (("workspace", bound.workspace), ("project", bound.project)):
        if scope.get(part) != expected:
            problems.append(
                Problem(
                    Code.SCOPE,
                    name,
                    f"tool {name}: {part} {scope.get(part)!r} is outside the persona's binding "
                    f"(its address's {part} is {expected!r})",
                )
            )
    reads = mode is Mode.READ
    limits: tuple[tuple[str, str, frozenset[str], str], ...] = (
        ("queues", "queue", bound.queues, "the persona's queues"),
        ("surfaces", "surface", bound.surfaces, "its bound surfaces"),
        (
            "paths",
            "path",
            bound.readable_paths if reads else bound.mutable_paths,
            "its workspace binding" if reads else "its mutable paths",
        ),
    )
    for part, label, allowed, where in limits:
        for value in scope.get(part, []):
            if value not in allowed:
                problems.append(
                    Problem(
                        Code.SCOPE,
                        name,
                        f"tool {name}: {label} {value!r} is outside {where}",
                    )
                )
    return problems


# Verdicts kept per run: far more than the distinct tool sets of a fleet, and a few MB at most.
VERDICTS_KEPT = 4096


class Verdicts:
    """What the rules say of a stamp's class, address, bindings and tools, worked out once for
    every stamp that shares them.

    Personas made alike carry the same tools, address and bindings; what makes each stamp its own
    (the persona's id, name and generation, the base composition hash, the authority) is read by
    neither the semantic validator nor the projections. So `virgo check`, which verifies every
    active stamp, and the factory, which builds a batch of them (stamps.services), ask the rules
    once per distinct set. They are asked about those parts alone:
    a rule that came to read another part would find it missing and say so of every stamp, not
    be served a verdict about another persona. One Verdicts serves one run: the registry and the
    verb catalogue the rules read are the code's, fixed while it runs. Bounded (VERDICTS_KEPT):
    a fleet of all-different stamps keeps constant memory.
    """

    def __init__(self, *, registry: HandlerRegistry = HANDLERS) -> None:
        self.registry = registry
        self._seen: dict[bytes, tuple[list[Problem], bool]] = {}

    def of(self, document: dict[str, Any]) -> tuple[list[Problem], bool]:
        """(semantic problems, whether the three projections name the same tools) of a document
        that passed the schema."""
        parts = {
            "persona": {"class": document["persona"]["class"]},
            "hierarchy": document["hierarchy"],
            "bindings": document["bindings"],
            "tools": document["tools"],
        }
        # Equal text is equal parts (JSON text says each value one way). Key order is the
        # document's: the same for documents made alike, and one made otherwise only misses.
        key = orjson.dumps(parts)
        verdict = self._seen.get(key)
        if verdict is None:
            verdict = (
                semantic_problems(parts, registry=self.registry),
                name_the_same_tools(projections_of(parts)),
            )
            if len(self._seen) >= VERDICTS_KEPT:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = verdict
        return verdict
