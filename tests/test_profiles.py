"""The class matrix and the required tool inventory, cell by cell, against the spec's own table."""

import ast
import re
from pathlib import Path

import pytest

from personas.catalogue import REQUIRED_TOOL_NAMES, VERB_NAMES, VERBS, Bundle, Mode
from personas.models import PersonaClass
from stamps import profiles

# The class matrix exactly as persona-capability-surface v1 prints it; columns secretary,
# team-coordinator, project-lead, coder-deputy.
SPEC_MATRIX = {
    "standard workspace and coordination": ("R/W", "R/W", "R/W", "R/W"),
    "peer verification and presence": ("R/W", "R/W", "R/W", "R/W"),
    "bounded graph context query": ("R", "R", "R", "R"),
    "decisions: list / raise": ("R/W", "R/W", "R/W", "R/W"),
    "decisions: resolve": ("W¹", "W²", "W", "-"),
    "tasks: list / get / report": ("R/W", "R/W", "R/W", "R/W"),
    "tasks: assign": ("W", "W", "W", "-"),
    "runs and artifacts": ("R", "R", "R/W", "R/W (assigned task)"),
    "human messages, replies, ack, typing": ("W (bound surfaces)", "W (bound surfaces)", "-", "-"),
    "reaction catalogue and apply": ("W", "W", "-", "-"),
    "cards, todo cards, file send": ("W", "W", "-", "-"),
    "human-surface/gateway status": ("R", "R", "R", "R"),
    "deployment/publication": ("C", "C", "C", "C"),
}
COLUMNS = ("secretary", "team-coordinator", "project-lead", "coder-deputy")
CELLS = [
    (bundle, persona_class, label)
    for bundle, labels in SPEC_MATRIX.items()
    for persona_class, label in zip(COLUMNS, labels, strict=True)
]

# The required inventory of the spec, by group.
SPEC_INVENTORY = {
    "workspace": "workspace_list workspace_stat workspace_hash workspace_read workspace_write",
    "identity": "list_peers lookup_sender set_summary set_activity reconcile_wake",
    "coordination": "send_broker_message list_coordination_messages ack_coordination_message",
    "decisions": "list_decisions raise_decision resolve_decision",
    "tasks": "list_tasks get_task report_task assign_task",
    "runs": "list_runs get_run create_run advance_run append_run_event record_artifact",
    "knowledge": "query_graph_context",
    "human": (
        "send_human_message reply_human_message ack_human_message start_typing stop_typing "
        "list_reaction_ids apply_human_reaction send_human_card send_human_todo send_human_file "
        "get_human_surface_status"
    ),
}
HUMAN_SURFACE_TOOLS = set(SPEC_INVENTORY["human"].split()) - {"get_human_surface_status"}


def test_the_matrix_has_thirteen_bundles_and_four_classes() -> None:
    """V1-MAT-1: 13 capability bundles by 4 classes, nothing more."""
    assert set(profiles.MATRIX) == set(Bundle) == {Bundle(row) for row in SPEC_MATRIX}
    assert len(profiles.MATRIX) == 13
    for row in profiles.MATRIX.values():
        assert tuple(row) == profiles.CLASSES == tuple(PersonaClass)


@pytest.mark.parametrize(("bundle", "persona_class", "label"), CELLS)
def test_every_cell_matches_the_spec(bundle: str, persona_class: str, label: str) -> None:
    """V1-MAT-1: each of the 52 cells, with its footnote or qualifier."""
    assert profiles.cell(persona_class, Bundle(bundle)).label == label


@pytest.mark.parametrize(("bundle", "persona_class", "label"), CELLS)
def test_every_cell_exposes_exactly_what_its_letter_says(
    bundle: str, persona_class: str, label: str
) -> None:
    """V1-MAT-1, V1-POL-2: R exposes reads, W and R/W reads and writes, C both behind confirm,
    - nothing; a verb the cell does not expose may not be granted to the class at all."""
    letter = label.split(" ")[0].rstrip("¹²")
    for verb in (v for v in VERBS if v.bundle == Bundle(bundle)):
        exposed = profiles.class_may_have(persona_class, verb.name)
        if letter == "-":
            assert not exposed, verb.name
        elif letter == "R":
            assert exposed == (verb.mode is Mode.READ), verb.name
        else:
            assert exposed, verb.name
        if exposed and letter == "C":
            assert profiles.access_for(persona_class, verb.name) == "confirm", verb.name


def test_the_footnotes_say_who_may_resolve() -> None:
    """V1-MAT-2, V1-MAT-3: a secretary only relays its human's decision, a coordinator only on
    its lane approver's authority; both conditions travel with the cell."""
    secretary = profiles.cell(PersonaClass.SECRETARY, Bundle.DECISIONS_RESOLVE)
    coordinator = profiles.cell(PersonaClass.TEAM_COORDINATOR, Bundle.DECISIONS_RESOLVE)
    assert secretary.condition is profiles.Condition.HUMAN_RELAY
    assert coordinator.condition is profiles.Condition.LANE_APPROVER
    assert "durable relay of the bound human authority" in profiles.FOOTNOTES[secretary.condition]
    assert "lane approver" in profiles.FOOTNOTES[coordinator.condition]


def test_the_inventory_is_the_specs_38_tools() -> None:
    """V1-INV-1: the required inventory is exactly the spec's 38 names."""
    spec = [name for group in SPEC_INVENTORY.values() for name in group.split()]
    assert len(spec) == 38
    assert sorted(REQUIRED_TOOL_NAMES) == sorted(spec)


@pytest.mark.parametrize(
    ("persona_class", "count"),
    [("secretary", 34), ("team-coordinator", 34), ("project-lead", 28), ("coder-deputy", 26)],
)
def test_every_class_requires_the_tools_its_cells_expose(persona_class: str, count: int) -> None:
    """V1-INV-1, V1-ACC-2: a class requires the inventory tools its cells expose."""
    required = profiles.required_tools(persona_class)
    assert len(required) == count
    assert len(set(required)) == count
    for name in REQUIRED_TOOL_NAMES:
        assert (name in required) == profiles.class_may_have(persona_class, name), name


def test_what_the_spec_singles_out() -> None:
    """V1-MAT-1: no resolve_decision for a coder deputy; human-surface tools only for the
    secretary and the team coordinator; status for everyone; deployment confirm for everyone."""
    deputy = profiles.required_tools(PersonaClass.CODER_DEPUTY)
    assert "resolve_decision" not in deputy
    assert "assign_task" not in deputy
    for persona_class in PersonaClass:
        required = set(profiles.required_tools(persona_class))
        has_surface = persona_class in (PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR)
        assert (required >= HUMAN_SURFACE_TOOLS) == has_surface
        assert not (required & HUMAN_SURFACE_TOOLS) or has_surface
        assert "get_human_surface_status" in required
        for webhook in ("register_webhook", "trigger_webhook"):
            assert profiles.class_may_have(persona_class, webhook)
            assert profiles.access_for(persona_class, webhook) == "confirm"
    assert {"create_run", "advance_run"} <= set(deputy)
    assert "create_run" not in profiles.required_tools(PersonaClass.SECRETARY)


def test_ordinary_work_is_allowed() -> None:
    """V1-POL-1, V1-ACC-3: recoverable work inside the persona's scope is `allow`."""
    for persona_class in PersonaClass:
        for name in profiles.required_tools(persona_class):
            assert profiles.access_for(persona_class, name) == "allow", (persona_class, name)


# Every app built on the catalogue: the producers and the consumers of the stamp. Only the
# catalogue (personas) spells out tool names; the demo data names the demo's verbs.
BUILT_ON_THE_CATALOGUE = ("stamps", "cards", "runtime", "channel", "virgo")
REPO = Path(profiles.__file__).resolve().parent.parent
DEMO_MODULE = REPO / "personas" / "management" / "commands" / "load_demo.py"
# The boundary table's examples each name the tool an example call is of (runtime.rules).
EXAMPLES_MODULE = REPO / "runtime" / "rules.py"
EXAMPLE_CALLS = frozenset({"E", "Example"})


def tool_names_spelled_out(source: str, *, examples: bool = False) -> list[tuple[int, str]]:
    """Every string of `source` that is a tool name or a list of tool names.

    Docstrings are prose; with `examples`, the tool of a boundary-table example is allowed.
    """
    tree = ast.parse(source)
    exempt: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            exempt.add(id(body[0].value))
        is_example = (
            examples
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in EXAMPLE_CALLS
        )
        if is_example:
            assert isinstance(node, ast.Call)
            exempt.update(id(value) for value in node.args[:1])
            exempt.update(id(k.value) for k in node.keywords if k.arg == "tool")
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        words = [word for word in re.split(r"[\s,;|]+", node.value) if word]
        listed = len(words) > 1 and all(word in VERB_NAMES for word in words)
        if id(node) not in exempt and (node.value in VERB_NAMES or listed):
            found.append((node.lineno, node.value))
    return found


@pytest.mark.parametrize(
    "planted",
    [
        'ALLOWED = ("workspace_read", "workspace_write")',
        "ALLOWED = {'send_human_message'}",
        'def allowed(name):\n    return name == "trigger_webhook"',
        'ALLOWED = "workspace_read workspace_write".split()',
        'ALLOWED = "claim,complete"',
        'ALLOWED = {"list_todos": True}',
        'E("workspace_read", {})',
    ],
)
def test_the_second_list_guard_sees_a_planted_list(planted: str) -> None:
    """V1-CONS-4: the guard below is not blind: each way of writing a hand-made allowlist is
    found (an example's tool counts too outside the boundary table)."""
    assert tool_names_spelled_out(planted)


def test_the_guard_reads_prose_and_the_boundary_examples_as_such() -> None:
    """V1-CONS-4: docstrings and the boundary table's examples are not lists of tools."""
    source = '"""Calls workspace_read, then workspace_write."""\nE("workspace_read", {})\n'
    assert tool_names_spelled_out(source, examples=True) == []


@pytest.mark.parametrize("app", BUILT_ON_THE_CATALOGUE)
def test_no_component_built_on_the_catalogue_keeps_a_second_tool_list(app: str) -> None:
    """V1-CONS-4, V1-CONS-1, V1-CONS-2, V1-CONS-3: no module of the stamps app, the card
    builder, the runtime (handler, MCP server, launcher, confirmations) or virgo-channel spells
    out a tool name or a list of them; every tool they know comes from the catalogue or the
    stamp."""
    modules = sorted((REPO / app).rglob("*.py"))
    assert modules
    for module in modules:
        if "migrations" in module.parts or module == DEMO_MODULE:
            continue
        found = tool_names_spelled_out(module.read_text(), examples=module == EXAMPLES_MODULE)
        assert found == [], f"{module.relative_to(REPO)}: {found}"
