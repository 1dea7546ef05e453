"""`manage.py mcp serve` as a real stdio subprocess, started from the launcher's MCP config."""

import json
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

from tests.runtime_support import Standalone, start_standalone

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


def test_the_stdio_server_lists_the_stamp_and_runs_calls(standalone: Standalone) -> None:
    """V1-CONS-1, V1-CONS-3, V1-ACC-1, V1-ACC-3: what the launcher configures is what is served."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    launched = standalone.run("launch", "--persona", uuid, "--print-allowlist")
    allowlist = launched.stdout.strip().split(",")
    config = standalone.home / "run" / uuid / "mcp-config.json"
    standalone.run("launch", "--persona", uuid, "--", "true")
    server = json.loads(config.read_text())["mcpServers"]["virgo"]
    parameters = StdioServerParameters(
        command=server["command"],
        args=server["args"],
        env={**standalone.env, **server["env"]},
        cwd=str(Path(server["args"][0]).parent),
    )

    async def scenario() -> tuple[list[str], dict, dict, McpError | None]:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = [tool.name for tool in (await session.list_tools()).tools]
            written = await session.call_tool(
                "workspace_write", {"path": "memory/hello.md", "content": "from stdio"}
            )
            read_back = await session.call_tool("workspace_read", {"path": "memory/hello.md"})
            try:
                await session.call_tool("trigger_webhook", {"webhook": "prod"})
                error = None
            except McpError as exc:
                error = exc
            return listed, written.structuredContent, read_back.structuredContent, error

    listed, written, read_back, error = anyio.run(scenario)
    assert listed == names
    assert allowlist == [f"mcp__virgo__{name}" for name in listed]
    assert written["ok"] is True
    assert read_back["result"]["content"] == "from stdio"
    assert error is not None and "trigger_webhook" in error.error.message
    workspace = standalone.home / "workspaces/work/core" / uuid / "memory/hello.md"
    assert workspace.read_text() == "from stdio"
