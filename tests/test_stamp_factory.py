"""The factory: one validated v3 stamp per persona generation, and every rejection it makes."""

import copy
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from personas.catalogue import VERBS, VERBS_BY_NAME, Boundary, Bundle, Mode, Verb
from personas.models import PersonaClass
from stamps import profiles
from stamps.factory import build_stamp
from stamps.problems import Code, StampRejected
from stamps.registry import HandlerRegistry
from stamps.validation import schema_problems, semantic_problems, validate_stamp
from tests.factories import REVIEWER_VERBS, stamp_kwargs, standing_verbs

Document = dict[str, Any]


def tool(document: Document, name: str) -> dict[str, Any]:
    return next(t for t in document["tools"] if t["name"] == name)


@pytest.fixture
def deputy() -> Document:
    return build_stamp(**stamp_kwargs(PersonaClass.CODER_DEPUTY))


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_one_schema_v3_stamp_for_any_class(persona_class: str) -> None:
    """V1-FAC-1, V1-FAC-8, V1-ACC-2, V1-SCH-3: the class profile plus the persona path resolve
    into one v3 stamp whose tools are the verb subset and include every required class tool."""
    kwargs = stamp_kwargs(persona_class)
    document = build_stamp(**kwargs)
    assert document["schema_version"] == 3
    assert schema_problems(document) == []
    names = [t["name"] for t in document["tools"]]
    assert sorted(names) == sorted(kwargs["verb_subset"])
    assert set(profiles.required_tools(persona_class)) <= set(names)
    catalogue_order = [verb.name for verb in VERBS if verb.name in names]
    assert names == catalogue_order
    assert document["persona"] == {
        "id": kwargs["persona"].id,
        "name": "Stamped",
        "class": persona_class,
        "generation": 1,
    }
    assert document["hierarchy"]["path"] == kwargs["address"]
    assert document["bindings"]["graph_namespace"] == kwargs["graph_namespace"]
    assert document["authority"]["human"] == {"owner": "user:1", "channel": "virgo-channel"}


def test_the_factory_has_no_address_default() -> None:
    """V1-FAC-2: the address is a required argument; without one nothing is built."""
    parameter = inspect.signature(build_stamp).parameters["address"]
    assert parameter.default is inspect.Parameter.empty
    kwargs = stamp_kwargs()
    del kwargs["address"]
    with pytest.raises(TypeError, match="address"):
        build_stamp(**kwargs)
    for missing in (None, ""):
        with pytest.raises(StampRejected, match="no default address"):
            build_stamp(**{**kwargs, "address": missing})


def test_access_is_allow_for_ordinary_work_and_confirm_at_boundaries() -> None:
    """V1-POL-1, V1-POL-2, V1-GB-1, V1-GB-3: exposed tools are allow or confirm; the webhook
    verbs (permission change, deployment) are confirm; nothing denied is listed."""
    kwargs = stamp_kwargs(
        PersonaClass.PROJECT_LEAD,
        verb_subset=standing_verbs(
            PersonaClass.PROJECT_LEAD, "register_webhook", "trigger_webhook"
        ),
    )
    document = build_stamp(**kwargs)
    assert {t["access"] for t in document["tools"]} == {"allow", "confirm"}
    assert tool(document, "trigger_webhook")["access"] == "confirm"
    assert tool(document, "trigger_webhook")["boundary"] == "external-publication-or-deployment"
    assert tool(document, "register_webhook")["boundary"] == "credential-or-permission-change"
    assert tool(document, "workspace_write")["access"] == "allow"
    assert tool(document, "workspace_write")["boundary"] is None


def test_scopes_come_from_the_persona_binding(deputy: Document) -> None:
    """V1-STD-2, V1-WS-1, V1-ACC-5: reads cover the bound workspace, writes only its mutable
    paths; queue tools carry the persona's queues; every tool is bound to its address."""
    read, write = tool(deputy, "workspace_read"), tool(deputy, "workspace_write")
    assert read["scope"]["paths"] == ["**"]
    assert write["scope"]["paths"] == [
        "DECISIONS.md",
        "FINDINGS.md",
        "QUEUE.md",
        "memory/**",
        "worktrees/core/**",
    ]
    assert tool(deputy, "claim")["scope"]["queues"] == ["reviews"]
    assert tool(deputy, "query_graph_context")["scope"]["queues"] == []
    assert tool(deputy, "create_run")["scope"]["condition"] == "assigned-task"
    for entry in deputy["tools"]:
        assert (entry["scope"]["workspace"], entry["scope"]["project"]) == ("work", "core")


def test_human_surface_tools_carry_bindings_and_the_footnotes(deputy: Document) -> None:
    """V1-HS-2, V1-MAT-2: human-surface tools are scoped to the bound surfaces (bindings, never
    credentials); the secretary's resolve carries its relay condition."""
    secretary = build_stamp(**stamp_kwargs(PersonaClass.SECRETARY))
    assert tool(secretary, "send_human_message")["scope"]["surfaces"] == ["teams:general"]
    assert tool(secretary, "send_human_message")["scope"]["condition"] == "bound-surfaces"
    resolve = tool(secretary, "resolve_decision")
    assert resolve["scope"]["condition"] == "relay-of-bound-human-decision"
    assert tool(secretary, "workspace_read")["scope"]["surfaces"] == []
    assert secretary["hierarchy"]["level"] == "root"


# The validator's rejections: each case changes a valid deputy stamp and names what it expects.


def _dup_name(d: Document) -> None:
    d["tools"].append(copy.deepcopy(tool(d, "claim")))


def _dup_action(d: Document) -> None:
    tool(d, "complete")["handler_action"] = "todos.claim"


def _bad_access(d: Document) -> None:
    tool(d, "claim")["access"] = "deny"


def _boundary_allow(d: Document) -> None:
    d["tools"].append(
        {
            "name": "trigger_webhook",
            "handler_action": "deploy.trigger_webhook",
            "access": "allow",
            "boundary": "external-publication-or-deployment",
            "scope": {**tool(d, "claim")["scope"], "queues": []},
        }
    )


def _foreign_queue(d: Document) -> None:
    tool(d, "claim")["scope"]["queues"] = ["deploys"]


def _foreign_workspace(d: Document) -> None:
    tool(d, "workspace_read")["scope"]["workspace"] = "other"


def _foreign_project(d: Document) -> None:
    tool(d, "list_runs")["scope"]["project"] = "web"


def _foreign_path(d: Document) -> None:
    tool(d, "workspace_write")["scope"]["paths"].append("src/**")


def _foreign_surface(d: Document) -> None:
    tool(d, "get_human_surface_status")["scope"]["surfaces"] = ["slack:ops"]


def _non_canonical_address(d: Document) -> None:
    d["hierarchy"]["path"] = "Work/Core/reviewer"


def _lossy_name(d: Document) -> None:
    tool(d, "claim")["name"] = "claim todo"


def _missing_tool(d: Document) -> None:
    d["tools"] = [t for t in d["tools"] if t["name"] != "workspace_write"]


def _class_tool(d: Document) -> None:
    d["tools"].append(
        {
            "name": "resolve_decision",
            "handler_action": "decisions.resolve",
            "access": "allow",
            "boundary": None,
            "scope": {**tool(d, "raise_decision")["scope"]},
        }
    )


def _dropped_condition(d: Document) -> None:
    tool(d, "create_run")["scope"]["condition"] = None


REJECTIONS: list[tuple[str, Callable[[Document], None], Code, str]] = [
    ("duplicate name", _dup_name, Code.DUPLICATE_NAME, "duplicate tool name 'claim'"),
    (
        "duplicate action",
        _dup_action,
        Code.DUPLICATE_ACTION,
        "duplicate handler action 'todos.claim'",
    ),
    (
        "class may not have it",
        _class_tool,
        Code.NOT_IN_CLASS,
        "tool resolve_decision is not available to class coder-deputy: 'decisions: resolve' is '-'",
    ),
    (
        "missing tool",
        _missing_tool,
        Code.MISSING_TOOL,
        "not standing: missing tool workspace_write",
    ),
    (
        "access",
        _bad_access,
        Code.BAD_ACCESS,
        "tool claim: access 'deny' is neither allow nor confirm",
    ),
    (
        "boundary allow",
        _boundary_allow,
        Code.BOUNDARY_ALLOW,
        "tool trigger_webhook crosses the external-publication-or-deployment boundary: its "
        "access must be confirm, not allow",
    ),
    (
        "queue scope",
        _foreign_queue,
        Code.SCOPE,
        "tool claim: queue 'deploys' is outside the persona's queues",
    ),
    (
        "workspace scope",
        _foreign_workspace,
        Code.SCOPE,
        "tool workspace_read: workspace 'other' is outside the persona's binding",
    ),
    (
        "project scope",
        _foreign_project,
        Code.SCOPE,
        "tool list_runs: project 'web' is outside the persona's binding",
    ),
    (
        "path scope",
        _foreign_path,
        Code.SCOPE,
        "tool workspace_write: path 'src/**' is outside its mutable paths",
    ),
    (
        "surface scope",
        _foreign_surface,
        Code.SCOPE,
        "tool get_human_surface_status: surface 'slack:ops' is outside its bound surfaces",
    ),
    (
        "address",
        _non_canonical_address,
        Code.ADDRESS,
        "address is not canonical: address 'Work/Core/reviewer' has a non-canonical segment",
    ),
    (
        "projection loss",
        _lossy_name,
        Code.PROJECTION_LOSS,
        "tool 'claim todo' cannot be projected without loss",
    ),
    (
        "condition",
        _dropped_condition,
        Code.CONDITION,
        "tool create_run: condition None is not the class matrix's 'assigned-task'",
    ),
]


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [case[1:] for case in REJECTIONS],
    ids=[case[0] for case in REJECTIONS],
)
def test_the_semantic_validator_names_each_problem(
    deputy: Document, change: Callable[[Document], None], code: Code, message: str
) -> None:
    """V1-FAC-4, V1-INV-2, V1-GB-6, V1-ACC-5: each rejection has its own message naming the item."""
    assert semantic_problems(deputy) == []
    change(deputy)
    problems = semantic_problems(deputy)
    matching = [p for p in problems if p.code is code]
    assert matching, problems
    assert any(message in p.message for p in matching), [p.message for p in matching]
    with pytest.raises(StampRejected):
        validate_stamp(deputy)


# What each change of a valid deputy stamp gives, exactly and in order: the code, the item an owner
# finds it under in the admin, and the whole message. The cases above check one problem each;
# these also prove that nothing else is said, and said about the wrong item.
_PROJECT_DUTY = (
    "address 'work/reviewer' is not canonical for a coder-deputy: a project duty carries its "
    "project segment (<workspace>/<project>/<role>)"
)
_LOST_ACTION = (
    "handler action todos.claim cannot be projected without loss: 2 tools name it but the "
    "handler table keeps one rule per handler action"
)


def _hierarchy_parts(d: Document) -> None:
    d["hierarchy"].update(level="workspace", role="coder")


def _binding_parts(d: Document) -> None:
    d["bindings"]["workspace"].update(workspace="other", project="web")


def _wrong_boundary(d: Document) -> None:
    tool(d, "claim")["boundary"] = "credential-or-permission-change"


def _wrong_action(d: Document) -> None:
    tool(d, "claim")["handler_action"] = "todos.take"


def _two_segments(d: Document) -> None:
    d["hierarchy"].update(path="work/reviewer", level="workspace", project=None)
    d["bindings"]["workspace"]["project"] = None
    for entry in d["tools"]:
        entry["scope"]["project"] = None


def _write_everywhere(d: Document) -> None:
    tool(d, "workspace_write")["scope"]["paths"] = ["**"]


def _read_outside(d: Document) -> None:
    tool(d, "workspace_read")["scope"]["paths"] = ["src/**"]


def _wrong_condition(d: Document) -> None:
    tool(d, "create_run")["scope"]["condition"] = "bound-surfaces"


def _no_scope(d: Document) -> None:
    del tool(d, "claim")["scope"]


def _scope_without_lists(d: Document) -> None:
    for part in ("queues", "surfaces", "paths"):
        del tool(d, "claim")["scope"][part]


EXACT: list[tuple[str, Callable[[Document], None], list[tuple[Code, str, str]]]] = [
    (
        "write everywhere",
        _write_everywhere,
        [
            (
                Code.SCOPE,
                "workspace_write",
                "tool workspace_write: path '**' is outside its mutable paths",
            )
        ],
    ),
    (
        "read outside",
        _read_outside,
        [
            (
                Code.SCOPE,
                "workspace_read",
                "tool workspace_read: path 'src/**' is outside its workspace binding",
            )
        ],
    ),
    (
        "address",
        _non_canonical_address,
        [
            (
                Code.ADDRESS,
                "Work/Core/reviewer",
                "address is not canonical: address 'Work/Core/reviewer' has a non-canonical "
                "segment 'Work' (lowercase slug)",
            )
        ],
    ),
    (
        "boundary allow",
        _boundary_allow,
        [
            (
                Code.BOUNDARY_ALLOW,
                "trigger_webhook",
                "tool trigger_webhook crosses the external-publication-or-deployment boundary: "
                "its access must be confirm, not allow",
            )
        ],
    ),
    (
        "wrong condition",
        _wrong_condition,
        [
            (
                Code.CONDITION,
                "create_run",
                "tool create_run: condition 'bound-surfaces' is not the class matrix's "
                "'assigned-task' for coder-deputy",
            )
        ],
    ),
    (
        "no scope",
        _no_scope,
        [
            (
                Code.SCOPE,
                "claim",
                "tool claim: workspace None is outside the persona's binding (its address's "
                "workspace is 'work')",
            ),
            (
                Code.SCOPE,
                "claim",
                "tool claim: project None is outside the persona's binding (its address's "
                "project is 'core')",
            ),
            (
                Code.PROJECTION_LOSS,
                "claim",
                "tool claim (handler action 'todos.claim') cannot be projected without loss: the "
                "three consumers would not give it back exactly",
            ),
        ],
    ),
    # Missing lists are the schema's to report; they bind nothing, so nothing is outside.
    ("scope without lists", _scope_without_lists, []),
    (
        "duplicate name",
        _dup_name,
        [
            (Code.DUPLICATE_NAME, "claim", "duplicate tool name 'claim' (2 tools)"),
            (
                Code.DUPLICATE_ACTION,
                "todos.claim",
                "duplicate handler action 'todos.claim' (2 tools)",
            ),
            (
                Code.PROJECTION_LOSS,
                "claim",
                "tool claim cannot be projected without loss: it is listed 2 times but an MCP "
                "server and a launcher allowlist carry each name once",
            ),
            (Code.PROJECTION_LOSS, "todos.claim", _LOST_ACTION),
        ],
    ),
    (
        "duplicate action",
        _dup_action,
        [
            (
                Code.DUPLICATE_ACTION,
                "todos.claim",
                "duplicate handler action 'todos.claim' (2 tools)",
            ),
            (
                Code.ACTION_MISMATCH,
                "complete",
                "tool complete: handler action 'todos.claim' is not the catalogue's "
                "'todos.complete'",
            ),
            (Code.PROJECTION_LOSS, "todos.claim", _LOST_ACTION),
        ],
    ),
    (
        "access",
        _bad_access,
        [
            (
                Code.BAD_ACCESS,
                "claim",
                "tool claim: access 'deny' is neither allow nor confirm (a denied capability is "
                "left out, not listed)",
            )
        ],
    ),
    (
        "class may not have it",
        _class_tool,
        [
            (
                Code.NOT_IN_CLASS,
                "resolve_decision",
                "tool resolve_decision is not available to class coder-deputy: 'decisions: "
                "resolve' is '-' (not exposed)",
            )
        ],
    ),
    (
        "workspace scope",
        _foreign_workspace,
        [
            (
                Code.SCOPE,
                "workspace_read",
                "tool workspace_read: workspace 'other' is outside the persona's binding (its "
                "address's workspace is 'work')",
            )
        ],
    ),
    (
        "project scope",
        _foreign_project,
        [
            (
                Code.SCOPE,
                "list_runs",
                "tool list_runs: project 'web' is outside the persona's binding (its address's "
                "project is 'core')",
            )
        ],
    ),
    (
        "queue scope",
        _foreign_queue,
        [(Code.SCOPE, "claim", "tool claim: queue 'deploys' is outside the persona's queues")],
    ),
    (
        "surface scope",
        _foreign_surface,
        [
            (
                Code.SCOPE,
                "get_human_surface_status",
                "tool get_human_surface_status: surface 'slack:ops' is outside its bound surfaces",
            )
        ],
    ),
    (
        "path scope",
        _foreign_path,
        [
            (
                Code.SCOPE,
                "workspace_write",
                "tool workspace_write: path 'src/**' is outside its mutable paths",
            )
        ],
    ),
    (
        "condition",
        _dropped_condition,
        [
            (
                Code.CONDITION,
                "create_run",
                "tool create_run: condition None is not the class matrix's 'assigned-task' for "
                "coder-deputy",
            )
        ],
    ),
    (
        "missing tool",
        _missing_tool,
        [(Code.MISSING_TOOL, "workspace_write", "not standing: missing tool workspace_write")],
    ),
    (
        "hierarchy parts",
        _hierarchy_parts,
        [
            (
                Code.ADDRESS,
                "hierarchy.level",
                "hierarchy.level is 'workspace' but address 'work/core/reviewer' gives 'project'",
            ),
            (
                Code.ADDRESS,
                "hierarchy.role",
                "hierarchy.role is 'coder' but address 'work/core/reviewer' gives 'reviewer'",
            ),
        ],
    ),
    (
        "binding parts",
        _binding_parts,
        [
            (
                Code.SCOPE,
                "bindings.workspace.workspace",
                "workspace binding workspace 'other' is outside the persona's address "
                "'work/core/reviewer' (workspace 'work')",
            ),
            (
                Code.SCOPE,
                "bindings.workspace.project",
                "workspace binding project 'web' is outside the persona's address "
                "'work/core/reviewer' (project 'core')",
            ),
        ],
    ),
    (
        "class address",
        _two_segments,
        [(Code.ADDRESS, "work/reviewer", _PROJECT_DUTY)],
    ),
    (
        "boundary",
        _wrong_boundary,
        [
            (
                Code.BOUNDARY_MISMATCH,
                "claim",
                "tool claim: boundary 'credential-or-permission-change' is not the catalogue's "
                "None",
            )
        ],
    ),
    (
        "action",
        _wrong_action,
        [
            (
                Code.UNREGISTERED_HANDLER,
                "claim",
                "tool claim: handler action 'todos.take' has no registered handler",
            ),
            (
                Code.ACTION_MISMATCH,
                "claim",
                "tool claim: handler action 'todos.take' is not the catalogue's 'todos.claim'",
            ),
        ],
    ),
    (
        "projection loss",
        _lossy_name,
        [
            (Code.UNKNOWN_TOOL, "claim todo", "tool claim todo is not in the verb catalogue"),
            (
                Code.PROJECTION_LOSS,
                "claim todo",
                "tool 'claim todo' cannot be projected without loss: the MCP tool list and the "
                "launcher allowlist carry only names of 1-64 letters, digits, '_' or '-'",
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("change", "expected"), [case[1:] for case in EXACT], ids=[case[0] for case in EXACT]
)
def test_each_rejection_is_exactly_its_problems(
    deputy: Document, change: Callable[[Document], None], expected: list[tuple[Code, str, str]]
) -> None:
    """V1-FAC-4, V1-ACC-5: every problem names its code, the exact item and the whole reason,
    and a change gives no other problem than its own (a write tool scoped to the whole
    workspace is one: writes stay inside the mutable paths)."""
    change(deputy)
    problems = semantic_problems(deputy)
    assert [(p.code, p.item, p.message) for p in problems] == expected
    # What an owner reads when the factory refuses: every message, in order.
    assert str(StampRejected(problems)) == "; ".join(message for _, _, message in expected)


def test_a_class_with_read_only_runs_is_refused_a_run_write() -> None:
    """V1-FAC-4, V1-POL-2: a write verb of a bundle the class may only read names the cell."""
    secretary = build_stamp(**stamp_kwargs(PersonaClass.SECRETARY))
    secretary["tools"].append(
        {**copy.deepcopy(tool(secretary, "list_runs")), "name": "create_run"}
        | {"handler_action": "runs.create"}
    )
    assert [(p.code, p.item, p.message) for p in semantic_problems(secretary)] == [
        (
            Code.NOT_IN_CLASS,
            "create_run",
            "tool create_run is not available to class secretary: 'runs and artifacts' is 'R' "
            "(read verbs only)",
        )
    ]


def test_the_validator_reports_a_partial_document_and_never_raises() -> None:
    """V1-FAC-4: the semantic validator never trusts that the schema ran: missing parts and
    entries that are not objects are reported against the item they are about."""
    assert [(p.code, p.item, p.message) for p in semantic_problems({})] == [
        (
            Code.ADDRESS,
            "None",
            "address is not canonical: an address is required (the factory has no default address)",
        )
    ]
    partial = {"hierarchy": {"path": "work/core/reviewer"}, "tools": ["junk", {"name": "claim"}]}
    gives = "but address 'work/core/reviewer' gives"
    outside = "is outside the persona's address 'work/core/reviewer'"
    assert [(p.code, p.item, p.message) for p in semantic_problems(partial)] == [
        (Code.ADDRESS, "hierarchy.level", f"hierarchy.level is None {gives} 'project'"),
        (Code.ADDRESS, "hierarchy.workspace", f"hierarchy.workspace is None {gives} 'work'"),
        (Code.ADDRESS, "hierarchy.project", f"hierarchy.project is None {gives} 'core'"),
        (Code.ADDRESS, "hierarchy.role", f"hierarchy.role is None {gives} 'reviewer'"),
        (
            Code.SCOPE,
            "bindings.workspace.workspace",
            f"workspace binding workspace None {outside} (workspace 'work')",
        ),
        (
            Code.SCOPE,
            "bindings.workspace.project",
            f"workspace binding project None {outside} (project 'core')",
        ),
        (
            Code.BAD_ACCESS,
            "claim",
            "tool claim: access None is neither allow nor confirm (a denied capability is left "
            "out, not listed)",
        ),
        (
            Code.UNREGISTERED_HANDLER,
            "claim",
            "tool claim: handler action None has no registered handler",
        ),
        (
            Code.ACTION_MISMATCH,
            "claim",
            "tool claim: handler action None is not the catalogue's 'todos.claim'",
        ),
        (
            Code.PROJECTION_LOSS,
            "claim",
            "tool claim (handler action None) cannot be projected without loss: the three "
            "consumers would not give it back exactly",
        ),
    ]


def test_a_schema_problem_at_the_top_level_says_so() -> None:
    """V1-FAC-4: a schema violation of the document itself is named as the top level."""
    problems = schema_problems([])
    assert [(p.code, p.item, p.message) for p in problems] == [
        (Code.SCHEMA, "(top level)", "schema v3: at (top level): [] is not of type 'object'")
    ]


def test_schema_problems_come_in_the_order_of_their_paths(deputy: Document) -> None:
    """V1-FAC-4: an owner reads a stamp's schema problems in document order, whatever order
    the schema checks its keywords in."""
    deputy["persona"]["class"] = "boss"
    deputy["authority"]["human"]["channel"] = 5
    _bad_access(deputy)
    index = next(i for i, t in enumerate(deputy["tools"]) if t["name"] == "claim")
    assert [p.item for p in schema_problems(deputy)] == [
        "authority/human/channel",
        "persona/class",
        f"tools/{index}/access",
    ]


@pytest.fixture
def catalogue_with(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Verb], HandlerRegistry]]:
    """Adds a verb to the catalogue for one test, with a registry that has its handler."""

    def add(verb: Verb) -> HandlerRegistry:
        monkeypatch.setitem(VERBS_BY_NAME, verb.name, verb)
        return HandlerRegistry([*(v.handler_action for v in VERBS), verb.handler_action])

    yield add
    # The matrix lookups are cached per verb name; forget the verb that is gone again.
    profiles.class_may_have.cache_clear()


def _listed(document: Document, verb: Verb) -> None:
    document["tools"].append(
        {
            "name": verb.name,
            "handler_action": verb.handler_action,
            "access": "allow",
            "boundary": verb.boundary.value if verb.boundary else None,
            "scope": copy.deepcopy(tool(document, "workspace_read")["scope"]),
        }
    )


def test_a_verb_on_a_denied_boundary_is_never_exposed(
    deputy: Document, catalogue_with: Callable[[Verb], HandlerRegistry]
) -> None:
    """V1-POL-2, V1-GB-4: should the catalogue gain a verb crossing a denied boundary, a stamp
    that lists it is refused whatever its access, naming the boundary."""
    verb = Verb(
        "read_secret",
        "secrets.read",
        Bundle.WORKSPACE_COORDINATION,
        Mode.READ,
        "Read a secret",
        boundary=Boundary.SECRET_CREDENTIAL_VALUES,
    )
    registry = catalogue_with(verb)
    _listed(deputy, verb)
    problems = semantic_problems(deputy, registry=registry)
    assert [(p.code, p.item, p.message) for p in problems] == [
        (
            Code.DENIED_EXPOSED,
            "read_secret",
            "tool read_secret crosses the denied secret-credential-values boundary and must not "
            "be exposed",
        ),
        (
            Code.NOT_IN_CLASS,
            "read_secret",
            "tool read_secret is not available to class coder-deputy: 'standard workspace and "
            "coordination' is 'R/W' (not exposed)",
        ),
    ]


def test_a_confirm_cell_needs_confirm_access_without_a_boundary(
    deputy: Document, catalogue_with: Callable[[Verb], HandlerRegistry]
) -> None:
    """V1-POL-2, V1-MAT-1: a tool whose matrix cell is 'C' is confirm even when its verb
    crosses no global boundary."""
    verb = Verb(
        "publish_docs", "docs.publish", Bundle.DEPLOYMENT_PUBLICATION, Mode.WRITE, "Publish"
    )
    registry = catalogue_with(verb)
    _listed(deputy, verb)
    deputy["tools"][-1]["scope"]["paths"] = []
    problems = semantic_problems(deputy, registry=registry)
    assert [(p.code, p.item, p.message) for p in problems] == [
        (
            Code.BOUNDARY_ALLOW,
            "publish_docs",
            "tool publish_docs: 'deployment/publication' is 'C' for coder-deputy: its access "
            "must be confirm, not allow",
        )
    ]


def test_duplicates_also_fail_projection(deputy: Document) -> None:
    """V1-BOOT-1: two tools on one handler action cannot reach the handler table intact."""
    _dup_action(deputy)
    messages = [p.message for p in semantic_problems(deputy) if p.code is Code.PROJECTION_LOSS]
    assert any("handler action todos.claim cannot be projected without loss" in m for m in messages)


def test_the_schema_runs_before_the_semantic_validator(deputy: Document) -> None:
    """V1-FAC-4: a stamp that breaks the JSON Schema is rejected by it, naming the JSON path."""
    _bad_access(deputy)
    with pytest.raises(StampRejected) as raised:
        validate_stamp(deputy)
    assert all(p.code is Code.SCHEMA for p in raised.value.problems)
    index = next(i for i, t in enumerate(deputy["tools"]) if t["name"] == "claim")
    assert f"at tools/{index}/access: 'deny' is not one of" in str(raised.value)


def test_the_factory_rejects_a_tool_the_class_may_not_have() -> None:
    """V1-POL-2: a verb whose matrix cell is '-' for the class is refused before emit."""
    kwargs = stamp_kwargs(verb_subset=[*standing_verbs(PersonaClass.CODER_DEPUTY), "create_for"])
    with pytest.raises(StampRejected) as raised:
        build_stamp(**kwargs)
    assert [p.message for p in raised.value.problems] == [
        "tool create_for is not available to class coder-deputy: 'tasks: assign' is '-' "
        "(not exposed)"
    ]


def test_the_factory_rejects_a_missing_required_tool() -> None:
    """V1-INV-2: a stamp cannot silently omit a required tool."""
    verbs = [v for v in standing_verbs(PersonaClass.CODER_DEPUTY) if v != "query_graph_context"]
    with pytest.raises(StampRejected) as raised:
        build_stamp(**stamp_kwargs(verb_subset=verbs))
    assert [p.message for p in raised.value.problems] == [
        "not standing: missing tool query_graph_context"
    ]


def test_the_factory_rejects_an_unregistered_handler() -> None:
    """V1-FAC-7: every handler action must be registered in the one handler registry."""
    registry = HandlerRegistry(
        verb.handler_action for verb in VERBS if verb.handler_action != "todos.claim"
    )
    with pytest.raises(StampRejected) as raised:
        build_stamp(**stamp_kwargs(verb_subset=[*REVIEWER_VERBS]), registry=registry)
    assert "tool claim: handler action 'todos.claim' has no registered handler" in [
        p.message for p in raised.value.problems
    ]


@pytest.mark.parametrize(
    ("where", "part", "value", "expected"),
    [
        ("hierarchy", "level", "root", "project"),
        ("hierarchy", "workspace", "home", "work"),
        ("hierarchy", "project", "web", "core"),
        ("hierarchy", "role", "lead", "reviewer"),
        ("workspace binding", "workspace", "home", "work"),
        ("workspace binding", "project", None, "core"),
    ],
)
def test_the_hierarchy_and_the_binding_are_read_off_the_address(
    deputy: Document, where: str, part: str, value: object, expected: str
) -> None:
    """V1-SCH-1, V1-FAC-4, V1-ACC-5: a stamp whose root/workspace/project/role hierarchy (or
    workspace binding) says something its address does not is refused, naming the part, what
    it says and what the address gives."""
    if where == "hierarchy":
        deputy["hierarchy"][part] = value
        item, message = (
            f"hierarchy.{part}",
            f"hierarchy.{part} is {value!r} but address 'work/core/reviewer' gives {expected!r}",
        )
    else:
        deputy["bindings"]["workspace"][part] = value
        item, message = (
            f"bindings.workspace.{part}",
            f"workspace binding {part} {value!r} is outside the persona's address "
            f"'work/core/reviewer' ({part} {expected!r})",
        )
    assert schema_problems(deputy) == []
    problems = [p for p in semantic_problems(deputy) if p.item == item]
    assert [p.message for p in problems] == [message]
    with pytest.raises(StampRejected):
        validate_stamp(deputy)


def test_the_stamp_carries_the_base_composition_hash_it_was_given() -> None:
    """V1-FAC-5, V1-STAMP-2: the factory hashes nothing of its own into the composition: the
    stamp carries exactly the base composition hash of its generation, so two generations with
    different compositions never share one."""
    hashes = ("1" * 64, "2" * 64)
    stamps = [build_stamp(**stamp_kwargs(base_composition_hash=value)) for value in hashes]
    assert [stamp["base_composition_hash"] for stamp in stamps] == list(hashes)
