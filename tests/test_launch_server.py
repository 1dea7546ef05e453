"""The MCP server a launch runs for its agent (serving.launcher.LaunchServer), in this process:
streamable HTTP on a loopback port it bound itself, answering only the launch's token (VX-CONF-2),
listing exactly the stamp's tools."""

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from runtime.stamp import load_active_stamp
from serving.handoff import LOOPBACK
from serving.launcher import LaunchServer
from tests.runtime_support import standing_persona


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_launch_server_answers_its_token_only_and_lists_the_stamp() -> None:
    persona = standing_persona()
    server = LaunchServer(persona)
    assert server.url == f"http://{LOOPBACK}:{server.port}/mcp"
    server.start()
    try:

        async def listed() -> list[str]:
            headers = {"Authorization": f"Bearer {server.token}"}
            with anyio.fail_after(60):
                async with (
                    httpx.AsyncClient(headers=headers) as client,
                    streamable_http_client(server.url, http_client=client) as (read, write, _),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    return [tool.name for tool in (await session.list_tools()).tools]

        names = anyio.run(listed)
        assert names == list(load_active_stamp(persona).allowlist)
        for headers in ({}, {"Authorization": "Bearer forged"}, {"Authorization": server.token}):
            assert httpx.post(server.url, json={}, headers=headers).status_code == 401
    finally:
        server.stop()
    with pytest.raises(httpx.TransportError):
        httpx.post(server.url, json={}, timeout=2)


@pytest.mark.django_db(transaction=True)
def test_each_launch_has_a_token_of_its_own() -> None:
    persona = standing_persona()
    first, second = LaunchServer(persona), LaunchServer(persona)
    try:
        assert first.token != second.token and len(first.token) >= 40
        assert first.port != second.port
    finally:
        first.socket.close()
        second.socket.close()
