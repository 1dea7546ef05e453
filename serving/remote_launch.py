"""`python -m serving.remote_launch <endpoint> --client-id <id> -- <agent command...>`: an
agent CLI on an agent host, confined to a persona's tools served over the network (VX-REMOTE-3,
VX-CONF-1).

What `virgo launch` does on the installation, done where the installation is not: no database,
no settings, no key. The launcher holds the OAuth tokens (serving.connect's file, refreshed as
they expire) and runs a loopback MCP server for the agent that answers only a token made for
this launch and passes each request on to the persona's endpoint; the agent's MCP config names
that loopback server, so the agent never holds a token of the installation's authorization
server, and its tools are exactly those the endpoint lists (the persona's stamp). The CLI is
confined as on the installation (serving.agent_clis), and runs in bubblewrap where the tokens'
directory and the credential locations of the operator's home are hidden, unless the owner
passes `--no-sandbox`.
"""

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import ClientSession, types
from mcp.server.lowlevel import Server

from serving import sandbox as sandboxes
from serving.agent_clis import AgentCli, RefusedArgument, known_cli, known_names
from serving.connect import (
    ENDPOINT_MARK,
    default_tokens,
    host_parser,
    issuer_of,
    remote_session,
)
from serving.handoff import (
    LoopbackServer,
    remote_mcp_config,
    visible_environment,
    write_private,
    write_private_json,
)

EXIT_USAGE = 2
PASS_ENV = "VIRGO_LAUNCH_PASS_ENV"


class Refused(Exception):
    """The launch cannot start: `reason` says why and what to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Relay:
    """The loopback server's side of the launch: one session with the persona's endpoint, opened
    on the server's own event loop, and every request of the agent passed on through it."""

    def __init__(self, endpoint: str, client_id: str, tokens: Path) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self.tokens = tokens
        self.remote: ClientSession | None = None

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        async with remote_session(
            self.endpoint, self.client_id, self.tokens, interactive=False
        ) as remote:
            self.remote = remote
            yield

    def server(self) -> Server:
        server: Server = Server("virgo", instructions="Tools of a Virgo persona, served remotely.")

        async def on_list_tools(request: types.ListToolsRequest) -> types.ServerResult:
            assert self.remote is not None
            return types.ServerResult(await self.remote.list_tools())

        async def on_call_tool(request: types.CallToolRequest) -> types.ServerResult:
            assert self.remote is not None
            meta = request.params.meta.model_dump() if request.params.meta else None
            result = await self.remote.call_tool(
                request.params.name, request.params.arguments, meta=meta
            )
            return types.ServerResult(result)

        server.request_handlers[types.ListToolsRequest] = on_list_tools
        server.request_handlers[types.CallToolRequest] = on_call_tool
        return server


async def listed_tools(
    endpoint: str, client_id: str, tokens: Path, port: int, refresh_token: str | None
) -> list[str]:
    """The persona's tools as its endpoint lists them (exactly the stamp's), the owner asked for
    consent first if no token is kept."""
    async with remote_session(
        endpoint, client_id, tokens, port=port, refresh_token=refresh_token
    ) as session:
        return [tool.name for tool in (await session.list_tools()).tools]


def agent_command(command: list[str]) -> tuple[list[str], AgentCli]:
    """The agent command, found on PATH, of a CLI Virgo confines, its arguments checked."""
    if not command:
        raise Refused("give the agent command after --, e.g. -- claude")
    found = shutil.which(command[0])
    if found is None:
        raise Refused(f"agent command {command[0]!r} not found on PATH")
    cli = known_cli(found)
    if cli is None:
        raise Refused(
            f"{os.path.basename(found)} is not an agent CLI Virgo can confine (it knows "
            f"{known_names()}): its own tools would reach past the persona's"
        )
    try:
        cli.check_arguments(command[1:])
    except RefusedArgument as refused:
        raise Refused(f"refusing to launch {cli.title}: {refused}") from None
    return [os.path.abspath(found), *command[1:]], cli


def passed_names(environ: dict[str, str], cli: AgentCli) -> frozenset[str]:
    """The names the operator passes to the agent (VIRGO_LAUNCH_PASS_ENV, comma-separated), but
    for those the confined CLI would read to load other settings or code."""
    names = frozenset(
        name for name in environ.get(PASS_ENV, "").replace(" ", "").split(",") if name
    )
    if refused := sorted(names & cli.refused_environment):
        listed = ", ".join(refused)
        raise Refused(
            f"{PASS_ENV} names {listed}, which {cli.title} would read to load settings, "
            f"prompts or code beyond its confinement: remove {listed}"
        )
    return names


def agent_home_of(tokens: Path, endpoint: str) -> Path:
    """The agent's own home on this host, beside the tokens (and hidden from it with them)."""
    home = tokens.parent / f"{endpoint.rpartition(ENDPOINT_MARK)[2]}.agent-home"
    for directory in (tokens.parent, home):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
    return home


def launch(options: argparse.Namespace) -> int:
    endpoint = options.endpoint
    issuer_of(endpoint)
    command, cli = agent_command(list(options.agent_command))
    passed = passed_names(dict(os.environ), cli)
    tokens = options.tokens or default_tokens(endpoint)
    refresh_token = None
    if options.refresh_token_file is not None:
        refresh_token = options.refresh_token_file.read_text().strip()
    home = agent_home_of(tokens, endpoint)
    sandbox = None
    if not options.no_sandbox:
        try:
            sandboxes.require_bwrap()
            secrets_here = [tokens.parent]
            if options.refresh_token_file is not None:
                secrets_here.append(options.refresh_token_file)
            sandbox = sandboxes.for_agent_host(
                agent_home=home, program=command[0], secrets=secrets_here
            )
        except sandboxes.SandboxUnavailable as exc:
            raise Refused(
                f"refusing to launch without the sandbox: {exc.reason}; or pass --no-sandbox "
                "to run the agent where it can read the launcher's tokens"
            ) from None
    tools = asyncio.run(
        listed_tools(endpoint, options.client_id, tokens, options.port, refresh_token)
    )
    if sandbox is None:
        print("warning: launching without the sandbox: the agent can read whatever you can")
    relay = Relay(endpoint, options.client_id, tokens)
    server = LoopbackServer(relay.server(), around=relay.session)
    server.start()
    written: list[Path] = []
    try:
        allowlist = ",".join(cli.allowlist(tools))
        config = write_private_json(
            home / f".virgo-mcp-{os.getpid()}.json", remote_mcp_config(server.url, server.token)
        )
        written.append(config)
        argv = [*command, *cli.confinement(allowlist=allowlist, mcp_config=config)]
        files = cli.home_files(home, url=server.url, token=server.token, tools=tools)
        written += [write_private(path, text) for path, text in files.items()]
        env = visible_environment(os.environ, passed)
        env.update(cli.environment)
        env.update(
            HOME=str(home),
            VIRGO_PERSONA=endpoint.rpartition(ENDPOINT_MARK)[2],
            VIRGO_ALLOWED_TOOLS=allowlist,
            VIRGO_MCP_CONFIG=str(config),
        )
        if sandbox is not None:
            env["TMPDIR"] = "/tmp"
            argv = sandbox.argv(argv)
        sys.stdout.flush()
        # The terminal's Ctrl-C is the agent's; the launcher outlives it to stop the relay.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process = subprocess.Popen(argv, env=env, cwd=home)
            signal.signal(signal.SIGTERM, lambda *_: process.terminate())
            returncode = process.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        server.stop()
        for path in written:
            path.unlink(missing_ok=True)
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str] | None = None) -> int:
    parser = host_parser("python -m serving.remote_launch", __doc__.split("\n\n")[0])
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the agent without bubblewrap: it can read the launcher's tokens",
    )
    given = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` is the agent's, even what looks like this command's own options.
    split = given.index("--") if "--" in given else len(given)
    options: Any = parser.parse_args(given[:split])
    options.agent_command = given[split + 1 :]
    try:
        return launch(options)
    except Refused as refused:
        print(f"error: {refused.reason}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
