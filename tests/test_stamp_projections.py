"""The three consumers' projections, derived from the exact bytes of the stamp file."""

import pytest

from personas.models import PersonaClass
from stamps.canonical import canonical_bytes
from stamps.factory import build_stamp
from stamps.models import CapabilityStamp
from stamps.projections import (
    HandlerRule,
    handler_table,
    launcher_allowlist,
    mcp_tool_list,
    name_the_same_tools,
    project,
    projection_problems,
)
from tests.factories import make_agent, make_owner, make_persona, stamp_kwargs


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
