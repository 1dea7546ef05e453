"""The MCP consumer of the stamp: `virgo mcp serve --persona <uuid>`.

Built on the low-level server of the `mcp` SDK (pinned below 2: 2.x changed the server API). It
lists exactly `tools[].name` of the persona's active stamp, in stamp order, and sends every call
through runtime.handler.handle, which authorizes it again from the same file. The annotations
(read-only, destructive, open-world) are derived from each stamp tool and are hints for the client
only: nothing here or in the handler ever reads them back.

A call naming a tool the stamp does not list is a JSON-RPC protocol error (invalid params), not a
tool result: the SDK's `call_tool` decorator would turn any exception into an error *result*, so
the CallToolRequest handler is registered directly.

The stamp is read again for every request, so a new generation is served as soon as it stands and
a stamp that stops verifying stops the service, call by call.
"""

import difflib
import json
import uuid
from importlib import metadata
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError

from personas.catalogue import VERBS_BY_NAME, Boundary, Mode
from personas.models import Persona
from runtime.handler import handle
from runtime.stamp import ActiveStamp, StampTool, StampUnavailable, load_active_stamp
from runtime.tools.params import object_schema
from runtime.tools.toolkit import Tool
from serving.transport import in_request_thread
from stamps.profiles import HUMAN_SURFACE_BUNDLES
from stamps.registry import HANDLERS
from virgo import telemetry

SERVER_NAME = "virgo"
# What serverInfo names: Virgo's version, read once (the SDK would read its own on every request).
SERVER_VERSION = metadata.version("virgo")
CORRELATION_ARGUMENT = "correlation_id"

_CORRELATION_SCHEMA = {
    "type": "string",
    "pattern": "^[A-Za-z0-9._:@/+=-]{1,200}$",
    "description": (
        "Optional. Identifies this operation. When a call is held for confirmation, call again "
        "with the same correlation_id after the authority answered: it then runs exactly once."
    ),
}


def input_schema(tool: StampTool) -> dict[str, Any]:
    """The tool's arguments as its implementation declares them, plus `correlation_id`.

    Read from the handler registry's binding of the tool's action (V1-CONS-1: the listing comes
    from the stamp, each schema from the implementation it dispatches to), so what is listed is
    exactly what the parser accepts. An action bound to no declaring implementation takes nothing
    the handler would run.
    """
    implementation = HANDLERS.implementation(tool.action)
    schema = (
        implementation.input_schema() if isinstance(implementation, Tool) else object_schema(())
    )
    schema["properties"][CORRELATION_ARGUMENT] = _CORRELATION_SCHEMA
    return schema


def annotations(tool: StampTool) -> types.ToolAnnotations:
    """Hints derived from the stamp's record of the tool (and the catalogue verb it names)."""
    verb = VERBS_BY_NAME[tool.name]
    read_only = verb.mode is Mode.READ
    # workspace_write deletes in its `delete` mode; any confirm tool or boundary tool may destroy.
    destructive = not read_only and (
        tool.access == "confirm" or tool.boundary is not None or tool.action == "workspace.write"
    )
    # Human surfaces (through virgo-channel to the hub) and deployments reach outside Virgo.
    open_world = verb.bundle in HUMAN_SURFACE_BUNDLES or tool.boundary == (
        Boundary.EXTERNAL_PUBLICATION.value
    )
    return types.ToolAnnotations(
        title=verb.description,
        readOnlyHint=read_only,
        destructiveHint=destructive,
        openWorldHint=open_world,
    )


def tool_definitions(stamp: ActiveStamp) -> list[types.Tool]:
    """Exactly tools[].name of the stamp, in its order (V1-CONS-1)."""
    tools = []
    for name in stamp.mcp_tools:
        tool = stamp.tools[name]
        note = " Asks for confirmation first." if tool.access == "confirm" else ""
        tools.append(
            types.Tool(
                name=name,
                description=f"{VERBS_BY_NAME[name].description}.{note}",
                inputSchema=input_schema(tool),
                annotations=annotations(tool),
            )
        )
    return tools


def _current(persona_pk: int) -> tuple[Persona, ActiveStamp]:
    persona = Persona.objects.select_related("agent__owner").get(pk=persona_pk)
    return persona, load_active_stamp(persona)


def _unavailable(exc: StampUnavailable) -> McpError:
    return McpError(types.ErrorData(code=types.INTERNAL_ERROR, message=exc.reason))


def build_server(persona: Persona, *, one_request: bool = False) -> Server:
    """The MCP server of one persona. Raises StampUnavailable if its stamp cannot be served.

    A long-lived server (stdio, `--http`) reads the persona's row and its stamp again for every
    request; `one_request` (the remote endpoint builds a server per request) lists and names
    the tools from `persona` and the stamp as the request just read them. Either way the
    handler reads the stamp again to decide a call.
    """
    loaded = load_active_stamp(persona)
    server: Server = Server(
        SERVER_NAME, version=SERVER_VERSION, instructions=f"Tools of persona {persona.name}."
    )
    persona_pk = persona.pk

    def current() -> tuple[Persona, ActiveStamp]:
        if one_request:
            return persona, loaded
        return _current(persona_pk)

    def list_tools() -> list[types.Tool]:
        try:
            _, stamp = current()
        except StampUnavailable as exc:
            raise _unavailable(exc) from None
        return tool_definitions(stamp)

    def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            requester, stamp = current()
        except StampUnavailable as exc:
            raise _unavailable(exc) from None
        if name not in stamp.mcp_tools:
            close = difflib.get_close_matches(name, stamp.mcp_tools, n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise McpError(
                types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=f"Unknown tool: {name} is not listed for this persona{hint}",
                )
            )
        correlation_id = arguments.pop(CORRELATION_ARGUMENT, None) or f"mcp-{uuid.uuid4()}"
        return handle(requester, name, arguments, correlation_id)

    async def on_list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        tools = await in_request_thread(list_tools)
        return types.ServerResult(types.ListToolsResult(tools=tools))

    async def on_call_tool(request: types.CallToolRequest) -> types.ServerResult:
        arguments = dict(request.params.arguments or {})
        meta = request.params.meta.model_dump() if request.params.meta else None
        # The agent's trace, if its client sent one, is the parent of the call's span.
        with telemetry.joined(meta):
            result = await in_request_thread(call_tool, request.params.name, arguments)
        return types.ServerResult(
            types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(result, indent=2))],
                structuredContent=result,
                isError=not result.get("ok", False),
            )
        )

    server.request_handlers[types.ListToolsRequest] = on_list_tools
    server.request_handlers[types.CallToolRequest] = on_call_tool
    return server


async def serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
