"""The tool implementations this runtime provides, bound into the one handler registry.

Each is bound as a `toolkit.Tool`: the implementation with the declaration of its arguments, so
the registry's binding is where the handler finds what to run and the MCP server what to list.

Only what is really implemented is bound. Every other handler action of the catalogue stays
declared but unbound: the handler refuses it (`not_implemented`) and the boot check reports it,
rather than any tool pretending to succeed.
"""

from typing import Any

from runtime.tools import coordination, decisions, graph, runs, webhooks, work
from runtime.tools.toolkit import Arguments, ToolCall, takes
from runtime.tools.workspace import TOOL_ARGUMENTS
from stamps.registry import HANDLERS


@takes(*TOOL_ARGUMENTS["workspace.list"])
def workspace_list(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return call.workspace.list(args["path"], cursor=args["cursor"], limit=args["limit"])


@takes(*TOOL_ARGUMENTS["workspace.stat"])
def workspace_stat(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return call.workspace.stat(args["path"])


@takes(*TOOL_ARGUMENTS["workspace.hash"])
def workspace_hash(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return call.workspace.hash(args["path"])


@takes(*TOOL_ARGUMENTS["workspace.read"])
def workspace_read(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return call.workspace.read(args["path"], offset=args["offset"], length=args["length"])


@takes(*TOOL_ARGUMENTS["workspace.write"])
def workspace_write(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return call.workspace.write(
        args["path"],
        args["content"],
        mode=args["mode"],
        expected_sha256=args["expected_sha256"],
    )


IMPLEMENTATIONS = {
    "workspace.list": workspace_list,
    "workspace.stat": workspace_stat,
    "workspace.hash": workspace_hash,
    "workspace.read": workspace_read,
    "workspace.write": workspace_write,
}


# Each tool module's own table, bound beside the workspace tools above.
TABLES = (
    IMPLEMENTATIONS,
    coordination.IMPLEMENTATIONS,
    decisions.IMPLEMENTATIONS,
    work.IMPLEMENTATIONS,
    runs.IMPLEMENTATIONS,
    graph.IMPLEMENTATIONS,
    webhooks.IMPLEMENTATIONS,
)


def bind_all() -> None:
    """Bind every implementation above; called once when the runtime app is ready."""
    for table in TABLES:
        for action, implementation in table.items():
            HANDLERS.register(action, implementation)
