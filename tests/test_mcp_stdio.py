"""`manage.py mcp serve` as a real process: stdio from `mcp config`, and HTTP."""

import json
import re
import secrets
import socket
import subprocess
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

from tests.live import free_port, wait_until
from tests.runtime_support import MANAGE, PROCESS_TIMEOUT, REPO, Standalone, start_standalone

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


def test_the_stdio_server_lists_the_stamp_and_runs_calls(standalone: Standalone) -> None:
    """V1-CONS-1, V1-CONS-3, V1-ACC-1, V1-ACC-3: what `mcp config` configures is what is served."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    launched = standalone.run("launch", "--persona", uuid, "--print-allowlist")
    allowlist = launched.stdout.strip().split(",")
    configured = standalone.run("mcp", "config", "--persona", uuid)
    assert configured.returncode == 0, configured.stderr
    server = json.loads(configured.stdout)["mcpServers"]["virgo"]
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


def test_the_http_server_serves_loopback_clients_with_the_token(standalone: Standalone) -> None:
    """V1-CONS-1: streamable HTTP lists the same tools; without the bearer token: 401."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    port = free_port()
    token = secrets.token_urlsafe(16)
    url = f"http://127.0.0.1:{port}/mcp"
    process = subprocess.Popen(
        [*MANAGE, "mcp", "serve", "--persona", uuid, "--http", "--port", str(port)],
        env={**standalone.env, "VIRGO_MCP_TOKEN": token},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _listening(port), what="the MCP HTTP server to listen")
        assert httpx.post(url, json={}).status_code == 401

        async def scenario() -> list[str]:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx.AsyncClient(headers=headers) as client,
                streamable_http_client(url, http_client=client) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return [tool.name for tool in (await session.list_tools()).tools]

        assert anyio.run(scenario) == names
    finally:
        process.terminate()
        process.wait(timeout=PROCESS_TIMEOUT)


def test_without_a_chosen_token_the_http_server_prints_how_to_send_its_own(
    standalone: Standalone,
) -> None:
    """Issue 43: the token `--http` makes is printed with what to do with it, and works."""
    uuid = standalone.personas["Deputy"]
    port = free_port()
    env = {name: value for name, value in standalone.env.items() if name != "VIRGO_MCP_TOKEN"}
    process = subprocess.Popen(
        [*MANAGE, "mcp", "serve", "--persona", uuid, "--http", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        served = process.stderr.readline()
        told = process.stderr.readline()
        assert served.endswith(f": http://127.0.0.1:{port}/mcp\n")
        header = re.fullmatch(
            r"Every request carries: (Authorization: Bearer \S+) "
            r"\(set VIRGO_MCP_TOKEN to choose the token\)\n",
            told,
        )
        assert header is not None, told
        name, _, value = header.group(1).partition(": ")
        wait_until(lambda: _listening(port), what="the MCP HTTP server to listen")
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx.post(url, json=hello, headers=accept).status_code == 401
        assert httpx.post(url, json=hello, headers={**accept, name: value}).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=PROCESS_TIMEOUT)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
