"""The three consumers' projections, derived from the exact bytes of the stamp file."""

import pytest

from personas.models import PersonaClass
from stamps.factory import build_stamp
from stamps.models import CapabilityStamp
from stamps.problems import Code
from stamps.projections import (
    HandlerRule,
    Projections,
    handler_table,
    launcher_allowlist,
    mcp_tool_list,
    name_the_same_tools,
    project,
    projection_problems,
    projections_of,
)
from tests.factories import make_agent, make_owner, make_persona, stamp_kwargs, standing_verbs
from virgo.canonical import canonical_bytes


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_the_three_projections_name_the_same_tools(persona_class: str) -> None:
    """V1-ACC-1, V1-CONS-1, V1-CONS-2, V1-CONS-3: MCP list and launcher allowlist are exactly
    tools[].name; the handler table maps each handler action to its tool, access and scope."""
    document = build_stamp(**stamp_kwargs(persona_class))
    data = canonical_bytes(document)
    names = tuple(tool["name"] for tool in document["tools"])
    assert mcp_tool_list(data) == names
    assert launcher_allowlist(data) == names
    table = handler_table(data)
    assert list(table) == [tool["handler_action"] for tool in document["tools"]]
    for tool in document["tools"]:
        assert table[tool["handler_action"]] == HandlerRule(
            tool=tool["name"], access=tool["access"], scope=tool["scope"], boundary=tool["boundary"]
        )
    assert name_the_same_tools(project(data))
    assert projection_problems(document) == []


@pytest.mark.django_db
def test_projections_come_from_the_file_on_disk() -> None:
    """V1-FAC-6, V1-CONS-4: the consumers read the generation's file; what it says is what they
    expose, with no list of their own."""
    persona = make_persona(make_agent(make_owner()))
    stored = CapabilityStamp.objects.get()
    data = stored.path.read_bytes()
    assert data == stored.data
    assert set(mcp_tool_list(data)) == set(persona.verb_subset)
    assert set(launcher_allowlist(data)) == set(persona.verb_subset)


def test_a_stamp_that_loses_a_tool_in_projection_is_caught() -> None:
    """V1-BOOT-1: two tools on one handler action leave the handler table one rule short."""
    document = build_stamp(**stamp_kwargs())
    claim = next(tool for tool in document["tools"] if tool["name"] == "claim")
    document["tools"].append({**claim, "name": "claim_again"})
    data = canonical_bytes(document)
    assert not name_the_same_tools(project(data))
    assert any(
        "cannot be projected without loss" in p.message for p in projection_problems(document)
    )


def test_the_handler_table_carries_each_tools_boundary() -> None:
    """V1-CONS-2, V1-ACC-1: the handler authorizes a boundary-crossing tool with its boundary,
    and a stamp with such tools still projects without loss."""
    kwargs = stamp_kwargs(
        PersonaClass.PROJECT_LEAD,
        verb_subset=standing_verbs(
            PersonaClass.PROJECT_LEAD, "register_webhook", "trigger_webhook"
        ),
    )
    document = build_stamp(**kwargs)
    table = handler_table(canonical_bytes(document))
    assert table["deploy.trigger_webhook"].boundary == "external-publication-or-deployment"
    assert table["deploy.trigger_webhook"].access == "confirm"
    assert table["deploy.register_webhook"].boundary == "credential-or-permission-change"
    assert projection_problems(document) == []


def test_one_name_on_two_actions_is_reported_once_and_later_losses_still_are() -> None:
    """V1-FAC-6, V1-BOOT-1: a name listed twice is one problem under that name (not one per
    copy), and the check goes on: a later tool with a field no consumer carries is lost too."""
    document = build_stamp(**stamp_kwargs())
    names = [tool["name"] for tool in document["tools"]]
    claim = document["tools"][names.index("claim")]
    document["tools"][names.index("complete")]["note"] = "not in any projection"
    document["tools"].append({**claim, "handler_action": "todos.claim_again"})
    assert [(p.code, p.item, p.message) for p in projection_problems(document)] == [
        (
            Code.PROJECTION_LOSS,
            "claim",
            "tool claim cannot be projected without loss: it is listed 2 times but an MCP server "
            "and a launcher allowlist carry each name once",
        ),
        (
            Code.PROJECTION_LOSS,
            "complete",
            "tool complete (handler action 'todos.complete') cannot be projected without loss: "
            "the three consumers would not give it back exactly",
        ),
    ]


def test_a_document_without_a_tool_list_projects_to_nothing() -> None:
    """V1-FAC-6: only tool objects in a tool list reach a consumer; anything else is dropped,
    never guessed at."""
    for document in ({}, {"tools": "claim"}, {"tools": ["claim", 3]}):
        assert projections_of(document) == Projections((), {}, ())
    partial = {"tools": ["claim", {"name": "claim"}]}
    assert projections_of(partial) == Projections(
        ("claim",), {"None": HandlerRule("claim", "None", {}, None)}, ("claim",)
    )


def test_a_lost_rule_early_in_the_list_does_not_hide_the_tools_after_it() -> None:
    """V1-FAC-6, V1-BOOT-1: the first tool's handler action taken over by the second is one
    problem under that action; every later tool still comes back exactly."""
    document = build_stamp(**stamp_kwargs())
    first, second = document["tools"][:2]
    second["handler_action"] = first["handler_action"]
    assert [(p.code, p.item, p.message) for p in projection_problems(document)] == [
        (
            Code.PROJECTION_LOSS,
            "workspace.list",
            "handler action workspace.list cannot be projected without loss: 2 tools name it but "
            "the handler table keeps one rule per handler action",
        )
    ]
