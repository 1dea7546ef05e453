"""`virgo mcp serve --persona <uuid>`: a persona's tools over MCP (stdio, or --http on loopback).

`virgo mcp config --persona <uuid> [--format claude|json]` prints the `mcpServers` block that
starts that server, for an MCP client's configuration: the one `virgo launch` writes.
"""

import json
import os
import secrets
import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas.commandline import ANY_PERSONA, persona_argument
from personas.models import Persona
from runtime.stamp import StampUnavailable, load_active_stamp
from serving.handoff import LOOPBACK_HOSTS, http_app
from serving.launcher import mcp_servers
from serving.mcp_server import build_server, serve_stdio

CONFINED_ONLY_IN_ITS_TOOLS = (
    "note: a client this configures is confined only in the tools Virgo's server gives it; its "
    "own built-in tools, settings and files stay its own. `virgo launch -- claude` confines the "
    "agent itself."
)


def waiting_on_a_terminal(persona: Persona) -> str:
    return (
        f"Serving the tools of {persona.name} over MCP on stdin and stdout: an MCP client "
        "starts this command and speaks JSON-RPC to it (`virgo mcp config` prints the block "
        "for one). Ctrl-C stops it."
    )


class Command(BaseCommand):
    help = "Serve one persona's stamped tools over MCP: stdio by default, --http on loopback."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        serve = sub.add_parser("serve", help="Serve the persona's tools.")
        serve.add_argument(
            "--persona", required=True, help="The persona: its id, uuid or unambiguous name."
        )
        serve.add_argument(
            "--http", action="store_true", help="Streamable HTTP at http://HOST:PORT/mcp."
        )
        serve.add_argument(
            "--host", default="127.0.0.1", choices=LOOPBACK_HOSTS, help="with --http: where"
        )
        serve.add_argument("--port", type=int, default=8765, help="with --http: the port")
        config = sub.add_parser(
            "config", help="Print the mcpServers block that starts the persona's server."
        )
        config.add_argument(
            "--persona", required=True, help="The persona: its id, uuid or unambiguous name."
        )
        config.add_argument(
            "--format",
            choices=("claude", "json"),
            default="claude",
            help="claude: Claude Code's .mcp.json (what `launch` writes); json: the plain block "
            "of Claude Desktop, Cursor and most other clients.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        persona = persona_argument(options["persona"], among=ANY_PERSONA, flag="--persona")
        if options["action"] == "config":
            self._config(persona, options["format"])
            return
        try:
            server = build_server(persona)
        except StampUnavailable as exc:
            raise CommandError(f"refusing to serve persona {persona.uuid}: {exc.reason}") from None
        if not options["http"]:
            if sys.stdin.isatty():
                # Pasted into a shell, it would otherwise wait in silence for a client's JSON.
                print(waiting_on_a_terminal(persona), file=sys.stderr, flush=True)
            anyio.run(serve_stdio, server)
            return
        import uvicorn

        token = os.environ.get("VIRGO_MCP_TOKEN") or secrets.token_urlsafe(32)
        host, port = options["host"], options["port"]
        # stdout stays clean for whoever parses it; the URL and token are for the operator.
        print(
            f"MCP (streamable HTTP) for persona {persona.name}: http://{host}:{port}/mcp",
            file=sys.stderr,
        )
        if "VIRGO_MCP_TOKEN" not in os.environ:
            print(
                f"Every request carries: Authorization: Bearer {token}"
                " (set VIRGO_MCP_TOKEN to choose the token)",
                file=sys.stderr,
            )
        uvicorn.run(http_app(server, host=host, port=port, token=token), host=host, port=port)

    def _config(self, persona: Persona, dialect: str) -> None:
        try:
            load_active_stamp(persona)
        except StampUnavailable as exc:
            raise CommandError(
                f"no MCP config for persona {persona.uuid}: its server would refuse: {exc.reason}"
            ) from None
        self.stdout.write(json.dumps(mcp_servers(persona, dialect=dialect), indent=2))
        # stdout is the block a client reads; the caution is for the person pasting it.
        self.stderr.write(CONFINED_ONLY_IN_ITS_TOOLS)
