"""The tool implementations this runtime provides, bound into the one handler registry.

Only what is really implemented is bound. Every other handler action of the catalogue stays
declared but unbound: the handler refuses it (`not_implemented`) and the boot check reports it,
rather than any tool pretending to succeed.
"""

from typing import TYPE_CHECKING, Any

from runtime import coordination, decisions, graph, runs, webhooks, work
from stamps.registry import HANDLERS

if TYPE_CHECKING:
    from runtime.handler import ToolCall


def workspace_list(call: "ToolCall") -> dict[str, Any]:
    arguments = call.op.arguments
    return call.workspace.list(
        arguments["path"], cursor=arguments["cursor"], limit=arguments["limit"]
    )


def workspace_stat(call: "ToolCall") -> dict[str, Any]:
    return call.workspace.stat(call.op.arguments["path"])


def workspace_hash(call: "ToolCall") -> dict[str, Any]:
    return call.workspace.hash(call.op.arguments["path"])


def workspace_read(call: "ToolCall") -> dict[str, Any]:
    arguments = call.op.arguments
    return call.workspace.read(
        arguments["path"], offset=arguments["offset"], length=arguments["length"]
    )


def workspace_write(call: "ToolCall") -> dict[str, Any]:
    arguments = call.op.arguments
    return call.workspace.write(
        arguments["path"],
        arguments["content"],
        mode=arguments["mode"],
        expected_sha256=arguments["expected_sha256"],
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
