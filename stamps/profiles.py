"""The class matrix of persona-capability-surface v1: the one place class profiles live.

The verbs themselves (tool names, handler actions, bundles, read/write modes, boundaries) live
in personas.catalogue; this module only says, per capability bundle, what each class may do with
that bundle's verbs. Everything else (the factory, the validator, the required-tool lists, the
tests) derives from these two modules, so nothing keeps a second list.
"""

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from personas.catalogue import VERBS, VERBS_BY_NAME, Boundary, Bundle, Mode, Verb
from personas.models import PersonaClass


class CellAccess(StrEnum):
    """A cell of the matrix: R read/use, W and R/W mutate within scope, C confirm, - absent."""

    READ = "R"
    WRITE = "W"
    READ_WRITE = "R/W"
    CONFIRM = "C"
    ABSENT = "-"


class Condition(StrEnum):
    """The qualifiers and footnotes of matrix cells, carried into each tool's scope."""

    HUMAN_RELAY = "relay-of-bound-human-decision"
    LANE_APPROVER = "authorized-by-lane-approver"
    BOUND_SURFACES = "bound-surfaces"
    ASSIGNED_TASK = "assigned-task"


FOOTNOTES: dict[Condition, str] = {
    Condition.HUMAN_RELAY: (
        "¹ A secretary resolves a decision only as a durable relay of the bound human "
        "authority's explicit decision."
    ),
    Condition.LANE_APPROVER: (
        "² A team coordinator resolves only when the bound lane approver authorizes that "
        "decision. Neither class self-originates a resolution."
    ),
}


@dataclass(frozen=True, slots=True)
class Cell:
    access: CellAccess
    condition: Condition | None = None

    def exposes(self, mode: Mode) -> bool:
        """R exposes the bundle's read verbs; W, R/W and C expose its read and write verbs."""
        if self.access is CellAccess.ABSENT:
            return False
        if self.access is CellAccess.READ:
            return mode is Mode.READ
        return True

    @property
    def label(self) -> str:
        """The cell as the specification prints it, e.g. `W¹` or `R/W (assigned task)`."""
        marks = {
            Condition.HUMAN_RELAY: "¹",
            Condition.LANE_APPROVER: "²",
            Condition.BOUND_SURFACES: " (bound surfaces)",
            Condition.ASSIGNED_TASK: " (assigned task)",
        }
        return self.access.value + (marks[self.condition] if self.condition else "")


SEC, TC, PL, CD = (
    PersonaClass.SECRETARY,
    PersonaClass.TEAM_COORDINATOR,
    PersonaClass.PROJECT_LEAD,
    PersonaClass.CODER_DEPUTY,
)
CLASSES: tuple[PersonaClass, ...] = (SEC, TC, PL, CD)

_R, _W, _RW = Cell(CellAccess.READ), Cell(CellAccess.WRITE), Cell(CellAccess.READ_WRITE)
_C, _NONE = Cell(CellAccess.CONFIRM), Cell(CellAccess.ABSENT)
_SURFACES = Cell(CellAccess.WRITE, Condition.BOUND_SURFACES)

# Rows in the specification's order; columns secretary, team-coordinator, project-lead,
# coder-deputy.
_ROWS: dict[Bundle, tuple[Cell, Cell, Cell, Cell]] = {
    Bundle.WORKSPACE_COORDINATION: (_RW, _RW, _RW, _RW),
    Bundle.PEERS_PRESENCE: (_RW, _RW, _RW, _RW),
    Bundle.GRAPH_CONTEXT: (_R, _R, _R, _R),
    Bundle.DECISIONS_LIST_RAISE: (_RW, _RW, _RW, _RW),
    Bundle.DECISIONS_RESOLVE: (
        Cell(CellAccess.WRITE, Condition.HUMAN_RELAY),
        Cell(CellAccess.WRITE, Condition.LANE_APPROVER),
        _W,
        _NONE,
    ),
    Bundle.TASKS_LIST_GET_REPORT: (_RW, _RW, _RW, _RW),
    Bundle.TASKS_ASSIGN: (_W, _W, _W, _NONE),
    Bundle.RUNS_ARTIFACTS: (_R, _R, _RW, Cell(CellAccess.READ_WRITE, Condition.ASSIGNED_TASK)),
    Bundle.HUMAN_MESSAGES: (_SURFACES, _SURFACES, _NONE, _NONE),
    Bundle.REACTIONS: (_W, _W, _NONE, _NONE),
    Bundle.HUMAN_CARDS_FILES: (_W, _W, _NONE, _NONE),
    Bundle.HUMAN_SURFACE_STATUS: (_R, _R, _R, _R),
    Bundle.DEPLOYMENT_PUBLICATION: (_C, _C, _C, _C),
}

MATRIX: dict[Bundle, dict[PersonaClass, Cell]] = {
    bundle: dict(zip(CLASSES, cells, strict=True)) for bundle, cells in _ROWS.items()
}

# Bundles whose tools talk to the hub through virgo-channel: their scope is the persona's bound
# human surfaces (never tenant credentials).
HUMAN_SURFACE_BUNDLES = frozenset(
    {
        Bundle.HUMAN_MESSAGES,
        Bundle.REACTIONS,
        Bundle.HUMAN_CARDS_FILES,
        Bundle.HUMAN_SURFACE_STATUS,
    }
)
# Bundles whose tools act on work items, and so on the persona's queues.
QUEUE_BUNDLES = frozenset({Bundle.TASKS_LIST_GET_REPORT, Bundle.TASKS_ASSIGN})

# Boundaries that ask for confirmation; the others deny, so a tool touching them is never exposed.
CONFIRM_BOUNDARIES = frozenset(boundary for boundary in Boundary if not boundary.is_deny)

# The workspace paths every persona may write (spec: "Standard ordinary surface"), and the
# class overlays that add the project worktree for classes whose duty belongs to a project.
STANDARD_MUTABLE_PATHS: tuple[str, ...] = ("DECISIONS.md", "FINDINGS.md", "QUEUE.md", "memory/**")
PROJECT_CLASSES = frozenset({PL, CD})
WHOLE_WORKSPACE = "**"


# The matrix and the catalogue are constants, so each lookup below is cached: the validator asks
# them for every tool of every stamp it checks.
@cache
def cell(persona_class: str, bundle: Bundle) -> Cell:
    return MATRIX[bundle][PersonaClass(persona_class)]


def verb_cell(persona_class: str, verb: Verb) -> Cell:
    return cell(persona_class, verb.bundle)


@cache
def class_may_have(persona_class: str, verb_name: str) -> bool:
    verb = VERBS_BY_NAME.get(verb_name)
    if verb is None or (verb.boundary is not None and verb.boundary.is_deny):
        return False
    return verb_cell(persona_class, verb).exposes(verb.mode)


@cache
def allowed_tools(persona_class: str) -> tuple[str, ...]:
    """Every catalogue verb the class may be granted, in catalogue order."""
    return tuple(verb.name for verb in VERBS if class_may_have(persona_class, verb.name))


@cache
def required_tools(persona_class: str) -> tuple[str, ...]:
    """The required-inventory tools the matrix gives the class: its stamp must contain them all."""
    return tuple(
        verb.name for verb in VERBS if verb.required and class_may_have(persona_class, verb.name)
    )


@cache
def access_for(persona_class: str, verb_name: str) -> str:
    """`confirm` for a C cell or a verb crossing a confirm boundary; otherwise `allow`."""
    verb = VERBS_BY_NAME[verb_name]
    if verb_cell(persona_class, verb).access is CellAccess.CONFIRM:
        return "confirm"
    if verb.boundary in CONFIRM_BOUNDARIES:
        return "confirm"
    return "allow"


def mutable_paths(persona_class: str, project: str | None) -> tuple[str, ...]:
    """The workspace binding's writable paths: the standard set plus the class overlay."""
    paths = list(STANDARD_MUTABLE_PATHS)
    if project is not None and PersonaClass(persona_class) in PROJECT_CLASSES:
        paths.append(f"worktrees/{project}/**")
    return tuple(sorted(paths))


def address_class_problem(persona_class: str, path: str) -> str | None:
    """A project duty needs a project segment; root and scope-wide roles must not carry one."""
    segments = path.split("/")
    if PersonaClass(persona_class) in PROJECT_CLASSES and len(segments) != 3:
        return (
            f"address {path!r} is not canonical for a {persona_class}: a project duty "
            "carries its project segment (<workspace>/<project>/<role>)"
        )
    if PersonaClass(persona_class) not in PROJECT_CLASSES and len(segments) != 2:
        return (
            f"address {path!r} is not canonical for a {persona_class}: a root or scope-wide "
            "role has two segments (<workspace>/<role>)"
        )
    return None


# The canonical role of each class, used only to map legacy (v1/v2) stamps, which carried a
# class but no registered address, onto a role path. The factory never uses it: it takes the
# persona's registered address.
LEGACY_ROLE_SEGMENT: dict[PersonaClass, str] = {
    SEC: "secretary",
    TC: "coordinator",
    PL: "lead",
    CD: "deputy",
}
