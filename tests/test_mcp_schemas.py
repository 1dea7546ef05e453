"""The input schema of every listed tool, read through a real `mcp` SDK client session.

V1-CONS-1: the MCP server lists exactly the stamp's tools, and each tool's input schema is
derived from the declaration its implementation makes of its arguments, the same declaration its
parser accepts. These tests hold the listing against the parser for every tool of every class:
the schema is valid and closed, a name it does not list is refused naming it, a required one left
out is refused naming it, and a call built from it alone gets past the parser into the
implementation.
"""

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from personas.models import Persona, PersonaClass
from runtime import confirmations
from runtime.models import DecisionRecord
from runtime.stamp import load_active_stamp
from runtime.tools.params import Id, Text
from runtime.tools.toolkit import Tool, takes
from serving.mcp_server import build_server
from stamps.registry import HANDLERS
from tests.channel_support import OPS, SURFACE_CLASSES
from tests.factories import make_agent, make_owner
from tests.runtime_support import standing_persona
from tests.tools_support import every_tool

pytestmark = pytest.mark.django_db

UNDECLARED = "colour"
CLASSES = list(PersonaClass)


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def persona_with_every_tool(persona_class: str) -> Persona:
    """A standing persona holding every tool its class may have, bound to a human surface if the
    class has them (a coder deputy under a lead, who answers its deputy-scope confirmations)."""
    owner = make_owner()
    agent = make_agent(owner)
    fields: dict[str, Any] = {"agent": agent, "extra": every_tool(persona_class)}
    if persona_class in SURFACE_CLASSES:
        fields["human_surface_bindings"] = [OPS]
    if persona_class == PersonaClass.CODER_DEPUTY:
        fields["owning_lead"] = standing_persona(
            owner, agent=agent, persona_class=PersonaClass.PROJECT_LEAD, name="Lead"
        )
    return standing_persona(owner, persona_class=persona_class, **fields)


def with_client(persona: Persona, scenario: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Run `scenario` against the persona's server; the ORM runs on this test's thread."""
    server = build_server(persona)

    async def main() -> Any:
        async with create_connected_server_and_client_session(server) as session:
            return await scenario(session)

    return async_to_sync(main)()


def listed_schemas(persona: Persona) -> dict[str, dict[str, Any]]:
    async def scenario(session: ClientSession) -> dict[str, dict[str, Any]]:
        return {tool.name: tool.inputSchema for tool in (await session.list_tools()).tools}

    return with_client(persona, scenario)


# Calls built from a schema ----------------------------------------------------------------------

_CANNED_FORMATS = {
    "uuid": lambda: str(uuid.uuid4()),
    "date": lambda: "2026-12-01",
    "uri": lambda: "https://example.org/hook",
}
# Tried in turn for a string: the first the property's schema admits is used.
_STRINGS = ("example", "", "a" * 64)


def own(persona: Persona) -> dict[str, str | None]:
    """What the persona's stamp binds it to, for the arguments that say where a call acts: the
    policy denies a surface or queue not bound as cross-scope access before any parser runs."""
    bindings = load_active_stamp(persona).document["bindings"]
    surfaces, queues = bindings["human_surfaces"], bindings["queues"]
    return {"binding": surfaces[0] if surfaces else None, "queue": queues[0] if queues else None}


def example_value(name: str, schema: dict[str, Any], where: dict[str, str | None]) -> Any:
    """A value the property's schema admits, made from the schema (and where the call acts)."""
    if name in where:
        return where[name]
    if "anyOf" in schema:
        return example_value(name, schema["anyOf"][0], where)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind == "integer":
        return schema["minimum"]
    if kind == "object":
        return example_call(schema, where) if "properties" in schema else {}
    if kind == "array":
        return [example_value(name, schema["items"], where)]
    if "format" in schema:
        return _CANNED_FORMATS[schema["format"]]()
    return next(s for s in _STRINGS if not list(Draft202012Validator(schema).iter_errors(s)))


def example_call(
    schema: dict[str, Any], where: dict[str, str | None], *, only_required: bool = True
) -> dict[str, Any]:
    """A call of the schema's required properties (or all of them), each with an example value;
    an optional one saying where the call acts is left out when the persona is bound to none."""
    names = schema.get("required", []) if only_required else schema["properties"]
    values = {
        name: example_value(name, schema["properties"][name], where)
        for name in names
        if name != "correlation_id"
    }
    return {name: value for name, value in values.items() if value is not None}


def assert_valid_call(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = [error.message for error in validator.iter_errors(arguments)]
    assert not errors, (arguments, errors)


class Caller:
    """Calls tools over one MCP session; a call held for confirmation is approved by its routed
    authority and made again under the same correlation id, so it gets to run."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.count = 0

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.count += 1
        cid = f"schema-{tool}-{self.count}"
        sent = {**arguments, "correlation_id": cid}
        result = (await self.session.call_tool(tool, dict(sent))).structuredContent
        if result.get("code") == "confirmation_required":
            await sync_to_async(_approve)(cid)
            result = (await self.session.call_tool(tool, dict(sent))).structuredContent
        assert result is not None
        return result


def _approve(correlation_id: str) -> None:
    record = DecisionRecord.objects.get(correlation_id=correlation_id)
    confirmations.decide(
        record=record,
        approve=True,
        user=record.authority_user,
        persona=record.authority_persona,
    )


@pytest.fixture
def entered(monkeypatch) -> list[str]:
    """The handler actions whose implementation was entered: each bound Tool, observed.

    The real implementation runs; the observer only notes that the parser let the call through.
    """
    seen: list[str] = []
    for action in HANDLERS.actions:
        tool = HANDLERS.implementation(action)
        assert isinstance(tool, Tool), f"{action} is bound without a declaration"

        def observed(call: Any, args: Any, _run=tool.implementation, _action=action) -> Any:
            seen.append(_action)
            return _run(call, args)

        monkeypatch.setitem(
            HANDLERS._handlers, action, dataclasses.replace(tool, implementation=observed)
        )
    return seen


# The tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_listed_input_schema_is_a_valid_closed_json_schema(persona_class: str) -> None:
    """V1-CONS-1: each tool's inputSchema is a draft 2020-12 schema of a closed object that names
    its required arguments, takes an optional correlation_id, and keeps combinators off the top
    level (model APIs refuse a tool whose input schema has them there)."""
    persona = persona_with_every_tool(persona_class)
    schemas = listed_schemas(persona)
    assert list(schemas) == list(load_active_stamp(persona).mcp_tools)
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", name
        assert schema["additionalProperties"] is False, name
        assert set(schema.get("required", [])) <= set(schema["properties"]) - {"correlation_id"}
        assert schema["properties"]["correlation_id"]["type"] == "string", name
        assert not {"anyOf", "oneOf", "allOf", "not"} & set(schema), name
        assert all(prop.get("description") for prop in schema["properties"].values()), name


@pytest.mark.parametrize("persona_class", CLASSES)
def test_a_call_built_from_the_required_properties_reaches_the_implementation(
    persona_class: str, entered: list[str]
) -> None:
    """V1-CONS-1: the required properties alone make a call the parser accepts: for every tool,
    the example call is valid against its schema and its implementation runs (what it then
    answers, often that the made-up id names nothing, is the implementation's own)."""
    persona = persona_with_every_tool(persona_class)
    stamp = load_active_stamp(persona)
    schemas = listed_schemas(persona)
    where = own(persona)

    async def scenario(session: ClientSession) -> dict[str, dict[str, Any]]:
        caller = Caller(session)
        results = {}
        for name, schema in schemas.items():
            arguments = example_call(schema, where)
            assert_valid_call(schema, arguments)
            results[name] = await caller(name, arguments)
        return results

    results = with_client(persona, scenario)
    for name, result in results.items():
        assert stamp.tools[name].action in entered, (name, result)


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_listed_property_is_one_the_parser_accepts(
    persona_class: str, entered: list[str]
) -> None:
    """V1-CONS-1: a call giving every property of the schema gets past the parser: the schema
    lists no name the implementation would refuse."""
    persona = persona_with_every_tool(persona_class)
    stamp = load_active_stamp(persona)
    schemas = listed_schemas(persona)
    where = own(persona)

    async def scenario(session: ClientSession) -> dict[str, dict[str, Any]]:
        caller = Caller(session)
        results = {}
        for name, schema in schemas.items():
            arguments = example_call(schema, where, only_required=False)
            assert_valid_call(schema, arguments)
            results[name] = await caller(name, arguments)
        return results

    results = with_client(persona, scenario)
    for name, result in results.items():
        assert stamp.tools[name].action in entered, (name, result)


@pytest.mark.parametrize("persona_class", CLASSES)
def test_a_name_the_schema_does_not_list_is_refused_naming_it(
    persona_class: str, entered: list[str]
) -> None:
    """V1-CONS-1: the schema is closed because the parser is: a call with one more name than the
    schema lists is refused as invalid arguments, the reason naming it, and nothing runs."""
    persona = persona_with_every_tool(persona_class)
    schemas = listed_schemas(persona)
    where = own(persona)

    async def scenario(session: ClientSession) -> dict[str, dict[str, Any]]:
        caller = Caller(session)
        results = {}
        for name, schema in schemas.items():
            assert UNDECLARED not in schema["properties"]
            results[name] = await caller(name, {**example_call(schema, where), UNDECLARED: "red"})
        return results

    results = with_client(persona, scenario)
    for name, result in results.items():
        assert (result["ok"], result["code"]) == (False, "invalid_arguments"), (name, result)
        assert f"does not take {UNDECLARED}" in result["reason"], (name, result)
    assert entered == []


@pytest.mark.parametrize("persona_class", CLASSES)
def test_a_required_property_left_out_is_refused_naming_it(
    persona_class: str, entered: list[str]
) -> None:
    """V1-CONS-1: what the schema marks required the parser requires: leaving any one of them out
    is refused as invalid arguments naming it, and nothing runs."""
    persona = persona_with_every_tool(persona_class)
    schemas = listed_schemas(persona)
    where = own(persona)

    async def scenario(session: ClientSession) -> list[tuple[str, str, dict[str, Any]]]:
        caller = Caller(session)
        results = []
        for name, schema in schemas.items():
            complete = example_call(schema, where)
            for required in complete:
                arguments = {k: v for k, v in complete.items() if k != required}
                results.append((name, required, await caller(name, arguments)))
        return results

    results = with_client(persona, scenario)
    assert results, "every class has tools with required arguments"
    for name, required, result in results:
        assert (result["ok"], result["code"]) == (False, "invalid_arguments"), (name, result)
        assert result["reason"].endswith(f"needs {required}"), (name, required, result)
    assert entered == []


def test_the_schema_states_the_bounds_and_enums_the_parser_enforces() -> None:
    """V1-CONS-1: a bound or enum in the schema is the parser's: a value just past it is refused
    as invalid arguments, the value at it is accepted."""
    persona = persona_with_every_tool(PersonaClass.PROJECT_LEAD)
    schemas = listed_schemas(persona)
    limit = schemas["list_tasks"]["properties"]["limit"]
    state = schemas["list_tasks"]["properties"]["state"]
    title = schemas["raise_decision"]["properties"]["title"]

    async def scenario(session: ClientSession) -> list[dict[str, Any]]:
        caller = Caller(session)
        return [
            await caller("list_tasks", {"limit": limit["maximum"]}),
            await caller("list_tasks", {"limit": limit["maximum"] + 1}),
            await caller("list_tasks", {"state": state["enum"][-1]}),
            await caller("list_tasks", {"state": "sideways"}),
            await caller("raise_decision", {"title": "x" * title["maxLength"]}),
            await caller("raise_decision", {"title": "x" * (title["maxLength"] + 1)}),
            await caller("raise_decision", {"title": "   "}),
        ]

    at_limit, past_limit, in_enum, out_of_enum, longest, too_long, blank = with_client(
        persona, scenario
    )
    assert at_limit["ok"] and in_enum["ok"] and longest["ok"]
    for refused in (past_limit, out_of_enum, too_long, blank):
        assert (refused["ok"], refused["code"]) == (False, "invalid_arguments"), refused
    assert "limit" in past_limit["reason"] and "state" in out_of_enum["reason"]
    assert not Draft202012Validator(title).is_valid("   ")


def test_a_declaration_naming_an_argument_twice_is_refused() -> None:
    """V1-CONS-1: one declaration, one entry per name: a schema's properties and a parser could
    otherwise each keep a different one of the two."""
    with pytest.raises(ValueError, match="declared twice: task"):
        takes(Id("task", "A task."), Text("task", "The same name again."))
