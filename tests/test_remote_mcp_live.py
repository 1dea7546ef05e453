"""VX-REMOTE-1, VX-REMOTE-2: the `mcp` SDK's own client, with its own OAuth support,
calls a persona's tools on a real virgo-web (production settings, PostgreSQL, Redis).

The agent host here is the SDK alone: it is given the endpoint's URL and a client id, nothing of
the installation. From the endpoint's 401 it finds the metadata, the authorization server, runs
the code flow with PKCE and the resource indicator (the owner's consent is given by a browser
session signed in with the owner's password), lists and calls the tools, and refreshes its token
when it expires. Revoking the persona refuses its next call.
"""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import RefreshToken
from pydantic import AnyUrl

from personas.services import persona_revoke
from runtime.stamp import load_active_stamp
from serving.connections import open_connection
from serving.resources import resource_url
from tests.live import REPO, WebServer, unavailable
from tests.remote_support import (
    PROTOCOL,
    REDIRECT,
    OwnersBrowser,
    granted,
    host_environment,
    public_client,
    signs_in_as_production_does,
    web,  # noqa: F401 (a fixture)
)
from tests.runtime_support import standing_persona
from tests.scripted_model import ScriptedAnthropic
from tests.serve_support import serve_home, serving  # noqa: F401 (a fixture)

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]


class HostStorage:
    """What the agent host keeps: the client id it was given, and its tokens."""

    def __init__(self, client_id: str) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[AnyUrl(REDIRECT)],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope="mcp",
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def session_calls(url: str, provider: OAuthClientProvider) -> tuple[list[str], Any]:
    async with (
        httpx.AsyncClient(auth=provider, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        called = await session.call_tool("workspace_list", {"path": "."})
    return [tool.name for tool in listed.tools], called


def test_the_sdk_client_completes_the_oauth_flow_and_calls_a_tool(
    web: WebServer,  # noqa: F811 (the fixture)
) -> None:
    """VX-REMOTE-1, VX-REMOTE-2: discovery from the 401, consent, PKCE and the resource; the
    tools listed are exactly the stamp's; a call runs; an expired token is refreshed by the SDK
    without asking the owner again; revoking the persona refuses the next call."""
    persona = standing_persona()
    owner = persona.agent.owner
    signs_in_as_production_does(owner)
    app = public_client(owner, name="Build host")
    url = resource_url(persona.uuid)
    browser = OwnersBrowser(web.base_url, owner.get_username())
    storage = HostStorage(app.client_id)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT)], scope="mcp", token_endpoint_auth_method="none"
        ),
        storage=storage,
        redirect_handler=browser.approve,
        callback_handler=browser.callback,
    )

    try:
        names, called = asyncio.run(session_calls(url, provider))
    finally:
        browser.http.close()

    assert names == list(load_active_stamp(persona).mcp_tools)
    assert called.structuredContent["ok"] is True, called
    assert len(browser.consent_pages) == 1 and persona.name in browser.consent_pages[0]
    assert browser.answer["iss"] == [web.base_url]
    first = storage.tokens
    assert first is not None and first.refresh_token

    # Past its three seconds the token is refreshed, without asking the owner again.
    asyncio.run(asyncio.sleep(3.5))
    names_again, _ = asyncio.run(session_calls(url, provider))
    assert names_again == names
    assert storage.tokens is not None and storage.tokens.access_token != first.access_token
    assert len(browser.consent_pages) == 1

    persona_revoke(persona=persona, actor=owner, reason_code="retired", reason="done", via="test")
    refused = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Authorization": f"Bearer {storage.tokens.access_token}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert refused.status_code == 410


def test_an_agent_host_connects_holding_a_token_and_nothing_else(
    web: WebServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-REMOTE-3, VX-REMOTE-1: `python -m serving.connect` runs with a PATH and a HOME only
    (no database, broker, SECRET_KEY or signing key); it prints the consent URL, takes the code
    on a loopback port of its choosing, lists exactly the stamp's tools, and keeps its tokens in
    a file only its account reads; the next run calls a tool on them without asking again."""
    persona = standing_persona()
    owner = persona.agent.owner
    signs_in_as_production_does(owner)
    app = public_client(owner, name="Build host", redirect_uris="http://127.0.0.1/callback")
    home = tmp_path / "host"
    home.mkdir()
    connect = [
        sys.executable,
        "-m",
        "serving.connect",
        persona.mcp_url,
        "--client-id",
        app.client_id,
    ]
    process = subprocess.Popen(
        connect,
        cwd=REPO,
        env=host_environment(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("Open this URL")
    browser = OwnersBrowser(web.base_url, owner.get_username())
    try:
        asyncio.run(browser.approve(process.stdout.readline().strip()))
        # The browser follows the redirect to the host's loopback port.
        assert browser.http.get(browser.location).status_code == 200
    finally:
        browser.http.close()
    # Read through the text streams: communicate() would read past what readline() buffered.
    listed, errors = process.stdout.read(), process.stderr.read() if process.stderr else ""
    assert process.wait(timeout=60) == 0, errors
    assert listed.split() == list(load_active_stamp(persona).mcp_tools)

    tokens = home / ".config" / "virgo" / "remote" / f"{persona.uuid}.json"
    assert tokens.stat().st_mode & 0o777 == 0o600
    called = subprocess.run(
        [*connect, "--call", "workspace_list", "--arguments", '{"path": "."}'],
        cwd=REPO,
        env=host_environment(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["ok"] is True


def test_a_get_on_each_worker_leaves_every_worker_answering(
    web: WebServer,  # noqa: F811 (the fixture)
) -> None:
    """VX-REMOTE-1, VX-REMOTE-2: Claude Code opens a GET on the endpoint once it has connected.
    On a real virgo-web with two workers, GETs that wait for an event stream are refused at once
    with 405 on each worker, and after them every worker still answers a call: no worker's
    exchange loop is held by a stream nobody will read."""
    persona = standing_persona()
    _, tokens = granted(persona)
    url = resource_url(persona.uuid)
    path = f"/mcp/{persona.uuid}"
    bearer = {"Authorization": f"Bearer {tokens['access_token']}", "MCP-Protocol-Version": PROTOCOL}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    names = list(load_active_stamp(persona).mcp_tools)

    def spread(method: str, answered: Any) -> None:
        # A new connection each: the kernel spreads them over the workers.
        for _ in range(400):
            with httpx.Client(timeout=30) as client:
                answered(client)
            if len(web.workers_that_served(path, method)) == 2:
                return
        raise AssertionError(f"no {method} of {path} reached both workers: see {web.log}")

    def get(client: httpx.Client) -> None:
        refused = client.get(url, headers={**bearer, "Accept": "text/event-stream"})
        assert refused.status_code == 405 and refused.headers["Allow"] == "POST"

    def call(client: httpx.Client) -> None:
        answer = client.post(
            url, json=listing, headers={**bearer, "Accept": "application/json, text/event-stream"}
        )
        assert answer.status_code == 200, answer.text
        assert [tool["name"] for tool in answer.json()["result"]["tools"]] == names

    spread("GET", get)
    spread("POST", call)


def test_the_host_client_needs_nothing_of_the_installation() -> None:
    """VX-REMOTE-3: serving.connect imports the mcp SDK and httpx, none of Django or Virgo."""
    imported = subprocess.run(
        [sys.executable, "-c", "import serving.connect, sys; print(' '.join(sys.modules))"],
        cwd=REPO,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    loaded = {name.split(".")[0] for name in imported.stdout.split()}
    assert not loaded & {"django", "virgo", "personas", "runtime", "stamps", "cards", "settling"}
    assert "mcp" in loaded


def connect_in_a_new_shell(line: str, home: Path, owner: tuple[str, str], base_url: str) -> str:
    """The printed `serving.connect` line in an agent host's shell (a PATH and a HOME), the
    owner's browser allowing it: what it printed after the consent URL."""
    process = subprocess.Popen(
        ["bash", "-c", line],
        cwd=REPO,
        env=host_environment(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith("Open this URL")
    browser = OwnersBrowser(base_url, *owner)
    try:
        asyncio.run(browser.approve(process.stdout.readline().strip()))
        assert browser.http.get(browser.location).status_code == 200
    finally:
        browser.http.close()
    # Read through the text streams: communicate() would read past what readline() buffered.
    listed, errors = process.stdout.read(), process.stderr.read()
    assert process.wait(timeout=60) == 0, errors
    return listed


def test_the_sdk_client_connects_to_make_serve_as_it_prints(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """VX-REMOTE-1, VX-REMOTE-3: `make serve` (virgo-web, workers, its own PostgreSQL and
    Redis) prints the demo host's command; pasted into an agent host's shell and allowed by the
    demo owner, it lists the Reviewer's tools."""
    serve = serving(request.getfixturevalue("serve_home"), tmp_path / "serve.log")
    try:
        said = serve.said()
        line = re.search(r"^Remote:\s+(.+)$", said, re.MULTILINE)
        password = re.search(r"^Demo owner: demo / (\S+) ", said, re.MULTILINE)
        assert line is not None and password is not None, said
        home = tmp_path / "host"
        home.mkdir()
        listed = connect_in_a_new_shell(
            line.group(1), home, ("demo", password.group(1)), serve.base
        )
        assert "workspace_list" in listed.split() and "complete" in listed.split()
    finally:
        serve.stop()


def test_a_host_with_no_browser_connects_on_a_connection_its_owner_opened(
    web: WebServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-REMOTE-3, VX-REMOTE-1: the owner opens a connection for a host (serving.connections,
    the admin's Remote access > Connections); the host, with a PATH, a HOME and that refresh
    token, lists the persona's tools with no consent page; on a later run, its access token
    expired, it refreshes it itself rather than send the owner to the consent page again."""
    persona = standing_persona()
    owner = persona.agent.owner
    client = public_client(owner, name="CI runner", redirect_uris="http://127.0.0.1/callback")
    connection = RefreshToken(user=owner, application=client)
    handed = tmp_path / "virgo-connection"
    handed.write_text(open_connection(connection, persona=persona))
    home = tmp_path / "host"
    home.mkdir()
    connect = [
        sys.executable, "-m", "serving.connect", persona.mcp_url, "--client-id", client.client_id,
    ]  # fmt: skip
    first = subprocess.run(
        [*connect, "--refresh-token-file", str(handed)],
        cwd=REPO, env=host_environment(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == list(load_active_stamp(persona).mcp_tools)

    kept = home / ".config" / "virgo" / "remote" / f"{persona.uuid}.json"
    tokens = json.loads(kept.read_text())
    kept.write_text(json.dumps({**tokens, "expires_at": 0}))
    again = subprocess.run(
        connect, cwd=REPO, env=host_environment(home), capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert not again.stdout.startswith("Open this URL")
    renewed = json.loads(kept.read_text())
    assert renewed["tokens"]["access_token"] != tokens["tokens"]["access_token"]
    assert renewed["expires_at"] > 0


CLAUDE = REPO / "requirements/agents/node_modules/.bin/claude"


def test_claude_code_calls_a_personas_tools_over_the_network(
    web: WebServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-REMOTE-2, VX-REMOTE-3: the pinned Claude Code CLI, given only the endpoint's URL and a
    bearer token in its MCP config, is offered exactly the stamp's tools and calls one, under a
    scripted model; nothing else of the installation is in its environment."""
    if not CLAUDE.exists():
        unavailable(f"{CLAUDE} is missing: `make agents` installs the pinned agent CLIs")
    persona = standing_persona()
    _, tokens = granted(persona)
    tools = list(load_active_stamp(persona).mcp_tools)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "virgo": {
                        "type": "http",
                        "url": persona.mcp_url,
                        "headers": {"Authorization": f"Bearer {tokens['access_token']}"},
                    }
                }
            }
        )
    )
    home = tmp_path / "host"
    home.mkdir()
    turn = [("mcp__virgo__workspace_list", {"path": ""})]
    with ScriptedAnthropic([turn, "done"]) as model:
        ran = subprocess.run(
            [
                str(CLAUDE), "-p", "work the queue", "--output-format", "json",
                "--tools", "", "--setting-sources", "", "--strict-mcp-config",
                "--mcp-config", str(config),
                "--allowedTools", ",".join(f"mcp__virgo__{name}" for name in tools),
            ],
            cwd=home,
            env={
                **host_environment(home),
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-ant-scripted",
            },
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    offered = set(model.tool_names_offered()) - {"DeferredToolPlaceholder"}
    assert offered == {f"mcp__virgo__{name}" for name in tools}
    [called] = model.calls()
    assert called["name"] == "mcp__virgo__workspace_list" and not called["is_error"], called
