"""The explicit reader of legacy v1 and v2 stamps (V1-SCH-2, V1-SCH-3).

Old stamps carried a capability class but no registered address; the reader maps that class to
its canonical role path. It only ever reads: a legacy file is never rewritten, converted in
place or re-emitted (new output is always v3). The shapes are documented in docs/stamps.md.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personas.addresses import ROOT_WORKSPACE, address_problem
from personas.catalogue import VERBS_BY_NAME
from personas.models import PersonaClass
from stamps import profiles
from stamps.problems import Code, Problem
from stamps.validation import schema_problems
from virgo.canonical import MalformedStamp, parse_strict

# v1 named its classes differently; v2 already used the v3 names.
V1_CLASSES: dict[str, PersonaClass] = {
    "secretary": PersonaClass.SECRETARY,
    "coordinator": PersonaClass.TEAM_COORDINATOR,
    "lead": PersonaClass.PROJECT_LEAD,
    "coder": PersonaClass.CODER_DEPUTY,
}


@dataclass(frozen=True, slots=True)
class LegacyTool:
    name: str
    handler_action: str
    access: str


@dataclass(frozen=True, slots=True)
class LegacyStamp:
    version: int
    persona_name: str
    persona_id: str | None
    persona_class: PersonaClass
    role_path: str
    tools: tuple[LegacyTool, ...]
    composition_hash: str


class LegacyStampError(ValueError):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(problem.message for problem in problems))
        self.problems = problems


def detect_version(document: dict[str, Any]) -> int | None:
    """3 and 2 say `schema_version`; v1 said `version`."""
    version = document.get("schema_version", document.get("version"))
    return version if version in (1, 2, 3) and not isinstance(version, bool) else None


def canonical_role_path(
    persona_class: PersonaClass, workspace: str, project: str | None, role: str | None = None
) -> str:
    """Where a legacy persona of this class sits in the root/workspace/project/role hierarchy.

    Raises LegacyStampError when the class needs a project segment the stamp does not have.
    """
    segment = role or profiles.LEGACY_ROLE_SEGMENT[persona_class]
    if persona_class in profiles.PROJECT_CLASSES:
        if not project:
            raise LegacyStampError(
                [
                    Problem(
                        Code.ADDRESS,
                        "project",
                        f"a legacy {persona_class} stamp must name its project to be mapped "
                        "to a role path (<workspace>/<project>/<role>)",
                    )
                ]
            )
        path = f"{workspace}/{project}/{segment}"
    elif persona_class == PersonaClass.SECRETARY and workspace == ROOT_WORKSPACE:
        path = f"{ROOT_WORKSPACE}/{segment}"
    else:
        path = f"{workspace}/{segment}"
    problem = address_problem(path)
    if problem:
        message = f"cannot map to a role path: {problem}"
        raise LegacyStampError([Problem(Code.ADDRESS, path, message)])
    return path


def read_legacy_stamp(path: Path) -> LegacyStamp:
    """Read a v1 or v2 stamp file (opened read-only) and map it."""
    return legacy_from_bytes(path.read_bytes())


def legacy_from_bytes(data: bytes) -> LegacyStamp:
    try:
        document = parse_strict(data)
    except MalformedStamp as exc:
        raise LegacyStampError([Problem(Code.SCHEMA, "(file)", f"malformed: {exc}")]) from None
    version = detect_version(document)
    if version not in (1, 2):
        raise LegacyStampError(
            [Problem(Code.SCHEMA, "version", f"not a legacy v1 or v2 stamp (version {version})")]
        )
    problems = schema_problems(document, version)
    if problems:
        raise LegacyStampError(problems)
    stamp = _map_v1(document) if version == 1 else _map_v2(document)
    problems = _tool_problems(stamp)
    if problems:
        raise LegacyStampError(problems)
    return stamp


def _map_v1(document: dict[str, Any]) -> LegacyStamp:
    persona_class = V1_CLASSES[document["capability_class"]]
    tools = []
    for name in document["tools"]:
        verb = VERBS_BY_NAME.get(name)
        # v1 listed names only; every listed tool was allowed unless it crossed a boundary.
        access = "allow" if verb is None else profiles.access_for(persona_class, name)
        tools.append(LegacyTool(name, verb.handler_action if verb else "", access))
    return LegacyStamp(
        version=1,
        persona_name=document["persona"],
        persona_id=None,
        persona_class=persona_class,
        role_path=canonical_role_path(
            persona_class, document["workspace"], document.get("project")
        ),
        tools=tuple(tools),
        composition_hash=document["composition_hash"],
    )


def _map_v2(document: dict[str, Any]) -> LegacyStamp:
    persona_class = PersonaClass(document["class"])
    scope = document["scope"]
    return LegacyStamp(
        version=2,
        persona_name=document["persona"]["name"],
        persona_id=document["persona"]["id"],
        persona_class=persona_class,
        role_path=canonical_role_path(
            persona_class, scope["workspace"], scope.get("project"), scope.get("role")
        ),
        tools=tuple(
            LegacyTool(tool["name"], tool["handler_action"], tool["access"])
            for tool in document["tools"]
        ),
        composition_hash=document["composition_hash"],
    )


def _tool_problems(stamp: LegacyStamp) -> list[Problem]:
    """Legacy tools must still be catalogue tools the mapped class may have, with their action."""
    problems = []
    seen: set[str] = set()
    for tool in stamp.tools:
        if tool.name in seen:
            problems.append(
                Problem(Code.DUPLICATE_NAME, tool.name, f"duplicate tool name {tool.name!r}")
            )
        seen.add(tool.name)
        verb = VERBS_BY_NAME.get(tool.name)
        if verb is None:
            problems.append(
                Problem(Code.UNKNOWN_TOOL, tool.name, f"tool {tool.name} is not in the catalogue")
            )
            continue
        if tool.handler_action != verb.handler_action:
            problems.append(
                Problem(
                    Code.ACTION_MISMATCH,
                    tool.name,
                    f"tool {tool.name}: handler action {tool.handler_action!r} is not the "
                    f"catalogue's {verb.handler_action!r}",
                )
            )
        if not profiles.class_may_have(stamp.persona_class, tool.name):
            problems.append(
                Problem(
                    Code.NOT_IN_CLASS,
                    tool.name,
                    f"tool {tool.name} is not available to class {stamp.persona_class}",
                )
            )
        elif verb.boundary is not None and tool.access == "allow":
            problems.append(
                Problem(
                    Code.BOUNDARY_ALLOW,
                    tool.name,
                    f"tool {tool.name} crosses the {verb.boundary} boundary: its access must be "
                    "confirm, not allow",
                )
            )
    return problems
