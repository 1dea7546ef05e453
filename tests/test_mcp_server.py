"""The MCP server read through a real client session of the `mcp` SDK (in-memory transport pair)."""

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session

from personas.models import PersonaClass
from runtime import confirmations
from runtime.models import DecisionRecord
from runtime.stamp import StampUnavailable, load_active_stamp
from serving.launcher import allowlist
from serving.mcp_server import build_server
from stamps.projections import handler_table, launcher_allowlist, mcp_tool_list
from stamps.storage import stamp_path
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def with_client(persona, scenario: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Run `scenario` against the persona's server; the ORM runs on this test's thread."""
    server = build_server(persona)

    async def main() -> Any:
        async with create_connected_server_and_client_session(server) as session:
            return await scenario(session)

    return async_to_sync(main)()


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_the_three_consumers_name_exactly_the_stamps_tools(persona_class: str) -> None:
    """V1-CONS-1, V1-CONS-2, V1-CONS-3, V1-ACC-1: MCP == handler == launcher == tools[]."""
    persona = standing_persona(persona_class=persona_class, extra=("trigger_webhook",))
    stamp = load_active_stamp(persona)
    data = stamp_path(persona.uuid, persona.generation).read_bytes()
    stamp_names = [tool["name"] for tool in stamp.document["tools"]]

    async def listed(session: ClientSession) -> list[str]:
        return [tool.name for tool in (await session.list_tools()).tools]

    over_mcp = with_client(persona, listed)
    printed = allowlist(stamp).split(",")
    assert over_mcp == stamp_names == list(mcp_tool_list(data))
    assert printed == [f"mcp__virgo__{name}" for name in stamp_names]
    assert list(launcher_allowlist(data)) == stamp_names
    assert sorted(rule.tool for rule in handler_table(data).values()) == sorted(stamp_names)
    assert sorted(stamp.tools) == sorted(stamp_names)


def test_annotations_are_derived_from_the_stamp() -> None:
    """V1-CONS-1: read-only, destructive and open-world hints come from each stamp tool."""
    persona = standing_persona(persona_class=PersonaClass.SECRETARY, extra=("trigger_webhook",))

    async def tools(session: ClientSession) -> dict[str, Any]:
        return {tool.name: tool for tool in (await session.list_tools()).tools}

    listed = with_client(persona, tools)
    read, write = listed["workspace_read"], listed["workspace_write"]
    assert (read.annotations.readOnlyHint, read.annotations.openWorldHint) == (True, False)
    assert (write.annotations.readOnlyHint, write.annotations.destructiveHint) == (False, True)
    webhook = listed["trigger_webhook"].annotations
    assert (webhook.readOnlyHint, webhook.destructiveHint, webhook.openWorldHint) == (
        False,
        True,
        True,
    )
    assert listed["send_human_message"].annotations.openWorldHint is True
    assert "path" in read.inputSchema["required"]


def test_calls_go_through_the_handler() -> None:
    """V1-CONS-2, V1-POL-1: an MCP call is authorized and run by handle()."""
    persona = standing_persona()

    async def scenario(session: ClientSession) -> tuple[Any, Any, Any]:
        written = await session.call_tool(
            "workspace_write", {"path": "QUEUE.md", "content": "- [ ] over MCP\n"}
        )
        read = await session.call_tool("workspace_read", {"path": "QUEUE.md"})
        denied = await session.call_tool("workspace_read", {"path": "memory/.env"})
        return written, read, denied

    written, read, denied = with_client(persona, scenario)
    assert written.isError is False and written.structuredContent["ok"] is True
    assert read.structuredContent["result"]["content"] == "- [ ] over MCP\n"
    assert denied.isError is True
    assert denied.structuredContent["boundary"] == "secret-credential-values"


def test_a_held_call_resumes_under_the_same_correlation_id() -> None:
    """V1-CONF-2: the model passes correlation_id back after the owner approved."""
    persona = standing_persona()
    arguments = {"path": "memory/a.md", "mode": "delete", "correlation_id": "mcp-test-1"}

    async def first(session: ClientSession) -> Any:
        await session.call_tool("workspace_write", {"path": "memory/a.md", "content": "x"})
        return await session.call_tool("workspace_write", dict(arguments))

    held = with_client(persona, first)
    assert held.structuredContent["code"] == "confirmation_required"
    record = DecisionRecord.objects.get(correlation_id="mcp-test-1")
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)

    async def again(session: ClientSession) -> Any:
        return await session.call_tool("workspace_write", dict(arguments))

    done = with_client(persona, again)
    assert done.structuredContent["ok"] is True
    assert done.structuredContent["result"]["deleted"] is True


def test_an_unlisted_tool_is_a_protocol_error_not_a_result() -> None:
    """V1-CONS-1: a name outside tools[] gets a JSON-RPC error."""
    persona = standing_persona()

    async def scenario(session: ClientSession) -> list[McpError]:
        errors = []
        for name in ("trigger_webhook", "definitely_not_a_tool"):
            try:
                await session.call_tool(name, {})
            except McpError as exc:
                errors.append(exc)
        return errors

    errors = with_client(persona, scenario)
    assert len(errors) == 2
    assert all(error.error.code == -32602 for error in errors)
    assert "trigger_webhook" in errors[0].error.message


def test_the_server_refuses_to_start_without_a_verified_stamp() -> None:
    """V1-BOOT-1, VX-OPS-4: an altered stamp: no server, then or later (the persona is
    quarantined); a lost file is rewritten from the stored stamp and served."""
    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(StampUnavailable, match="altered"):
        build_server(persona)
    with pytest.raises(StampUnavailable, match=r"not standing.*quarantined.*altered"):
        build_server(persona)
    lost = standing_persona()
    lost_path = stamp_path(lost.uuid, lost.generation)
    data = lost_path.read_bytes()
    lost_path.unlink()
    build_server(lost)
    assert lost_path.read_bytes() == data
