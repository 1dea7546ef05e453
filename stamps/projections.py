"""The three runtime consumers' views of one stamp, derived from the exact file bytes.

The MCP/channel server exposes exactly `tools[].name`, the handler authorizes each
`tools[].handler_action` with its access and scope, and the launcher passes exactly
`tools[].name` as its allowlist. These are pure functions of the bytes: no consumer keeps a
list of its own, and `projection_problems` proves that nothing is lost on the way.
"""

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from stamps.problems import Code, Problem
from virgo.canonical import parse_strict

# What every consumer can carry unchanged: an MCP tool name that a launcher can also pass in
# a comma- or space-separated allowlist.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class HandlerRule:
    """What the handler knows about one handler action: which tool, access and scope."""

    tool: str
    access: str
    scope: dict[str, Any]
    boundary: str | None


@dataclass(frozen=True, slots=True)
class Projections:
    mcp_tools: tuple[str, ...]
    handlers: dict[str, HandlerRule]
    allowlist: tuple[str, ...]


def _tools(document: dict[str, Any]) -> list[dict[str, Any]]:
    tools = document.get("tools")
    if not isinstance(tools, list):
        return []
    return [tool for tool in tools if isinstance(tool, dict)]


def mcp_tools_of(document: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(tool.get("name")) for tool in _tools(document))


def handlers_of(document: dict[str, Any]) -> dict[str, HandlerRule]:
    return {
        str(tool.get("handler_action")): HandlerRule(
            tool=str(tool.get("name")),
            access=str(tool.get("access")),
            scope=dict(tool.get("scope") or {}),
            boundary=tool.get("boundary"),
        )
        for tool in _tools(document)
    }


def allowlist_of(document: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(tool.get("name")) for tool in _tools(document))


def mcp_tool_list(data: bytes) -> tuple[str, ...]:
    """V1-CONS-1: the tool names the MCP/channel server exposes."""
    return mcp_tools_of(parse_strict(data))


def handler_table(data: bytes) -> dict[str, HandlerRule]:
    """V1-CONS-2: handler action -> the tool, access and scope the handler authorizes."""
    return handlers_of(parse_strict(data))


def launcher_allowlist(data: bytes) -> tuple[str, ...]:
    """V1-CONS-3: the tool allowlist the launcher passes."""
    return allowlist_of(parse_strict(data))


def project(data: bytes) -> Projections:
    return projections_of(parse_strict(data))


def projections_of(document: dict[str, Any]) -> Projections:
    """The three consumers' views of a document already parsed from a stamp file's bytes."""
    return Projections(mcp_tools_of(document), handlers_of(document), allowlist_of(document))


def name_the_same_tools(projections: Projections) -> bool:
    """All three consumers name exactly the same tools, in the same order where order exists."""
    handled = sorted(rule.tool for rule in projections.handlers.values())
    return projections.mcp_tools == projections.allowlist and sorted(projections.mcp_tools) == (
        handled
    )


def projection_problems(document: dict[str, Any]) -> list[Problem]:
    """Rebuild every tool from the three projections; any tool that does not come back is lost."""
    problems = []
    tools = _tools(document)
    for tool in tools:
        name = str(tool.get("name"))
        if not TOOL_NAME.match(name):
            problems.append(
                Problem(
                    Code.PROJECTION_LOSS,
                    name,
                    f"tool {name!r} cannot be projected without loss: the MCP tool list and the "
                    "launcher allowlist carry only names of 1-64 letters, digits, '_' or '-'",
                )
            )
    mcp, handlers, allowlist = mcp_tools_of(document), handlers_of(document), allowlist_of(document)
    for name, count in Counter(mcp).items():
        if count > 1:
            problems.append(
                Problem(
                    Code.PROJECTION_LOSS,
                    name,
                    f"tool {name} cannot be projected without loss: it is listed {count} times "
                    "but an MCP server and a launcher allowlist carry each name once",
                )
            )
    actions = Counter(str(tool.get("handler_action")) for tool in tools)
    for action, count in actions.items():
        if count > 1:
            problems.append(
                Problem(
                    Code.PROJECTION_LOSS,
                    action,
                    f"handler action {action} cannot be projected without loss: {count} tools "
                    "name it but the handler table keeps one rule per handler action",
                )
            )
    rules_by_tool: dict[str, tuple[str, HandlerRule]] = {
        rule.tool: (action, rule) for action, rule in handlers.items()
    }
    rebuilt = []
    for name in mcp:
        action, rule = rules_by_tool.get(name, (None, None))
        if rule is None or name not in allowlist:
            rebuilt.append(None)
            continue
        rebuilt.append(
            {
                "name": name,
                "handler_action": action,
                "access": rule.access,
                "scope": rule.scope,
                "boundary": rule.boundary,
            }
        )
    already = {problem.item for problem in problems}
    for index, tool in enumerate(tools):
        name = str(tool.get("name"))
        if name in already or str(tool.get("handler_action")) in already:
            continue
        if index >= len(rebuilt) or rebuilt[index] != tool:
            problems.append(
                Problem(
                    Code.PROJECTION_LOSS,
                    name,
                    f"tool {name} (handler action {tool.get('handler_action')!r}) cannot be "
                    "projected without loss: the three consumers would not give it back exactly",
                )
            )
    return problems
