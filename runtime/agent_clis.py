"""The agent CLIs `virgo launch` knows how to confine (VX-CONF-1), each through its own flags.

A CLI is known by the name of the program the command runs. For each, Virgo adds the arguments
that leave the agent exactly the stamp's tools (no built-in tool, no MCP server but Virgo's, no
settings source whose hooks, permission rules, plugins or servers could add to them) and refuses
the owner's arguments that would undo that. The owner's arguments are checked against the options
known to be harmless, not against a list of harmful ones: an option a later release adds is
refused until someone has looked at it.

Codex CLI and Gemini CLI are not known yet (docs/decisions.md): `launch` refuses them, as it
refuses any other command, unless the owner asks for an unconfined launch.
"""

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


class RefusedArgument(Exception):
    """An argument of the owner's that would widen what the agent reaches."""


@dataclass(frozen=True, slots=True)
class AgentCli:
    """One agent CLI and how it is confined."""

    name: str
    title: str
    programs: frozenset[str]
    # Options that take no value, and options whose value follows (or comes after `=`).
    flags: frozenset[str]
    valued: frozenset[str]
    # Values an option may take, where only some of them are harmless.
    allowed_values: dict[str, frozenset[str]] = field(default_factory=dict)
    subcommands: frozenset[str] = frozenset()
    # Set in the agent's environment: what the CLI reads there to stay quiet and in place.
    environment: dict[str, str] = field(default_factory=dict)

    def check_arguments(self, arguments: Sequence[str]) -> None:
        """Raise RefusedArgument for the first of the owner's arguments that could widen."""
        index = 0
        prompt_seen = False
        while index < len(arguments):
            argument = arguments[index]
            index += 1
            if argument == "--":
                # Virgo's own arguments follow the owner's: after a `--` the CLI would read them
                # as a prompt, and start unconfined.
                raise RefusedArgument(
                    "-- would make the CLI ignore the confinement that follows it: give the "
                    "prompt without --"
                )
            if not argument.startswith("-") or argument == "-":
                if not prompt_seen and argument in self.subcommands:
                    raise RefusedArgument(
                        f"{argument!r} is a {self.title} subcommand, not a session: run "
                        f"`{self.name} {argument}` outside `virgo launch`"
                    )
                prompt_seen = True
                continue
            name, separator, value = argument.partition("=")
            if name in self.flags and not separator:
                continue
            if name not in self.valued:
                raise RefusedArgument(
                    f"{name} is not an option `virgo launch` passes to {self.title}: it may add "
                    f"tools, settings or servers beyond the stamp's"
                )
            if not separator:
                if index >= len(arguments):
                    raise RefusedArgument(f"{name} needs a value")
                value = arguments[index]
                index += 1
            allowed = self.allowed_values.get(name)
            if allowed is not None and value not in allowed:
                raise RefusedArgument(
                    f"{name} {value} would widen what the agent may do: use one of "
                    f"{', '.join(sorted(allowed))}"
                )

    def confinement(self, *, allowlist: str, mcp_config: Path) -> list[str]:
        """The arguments that confine this CLI to the stamp's tools and Virgo's server."""
        return CONFINEMENTS[self.name](allowlist, mcp_config)

    def settings_described(self) -> list[str]:
        return DESCRIPTIONS[self.name]


# The one settings source left: flag settings always apply, so they turn off what no other source
# may turn on again (hooks; a bypass mode, should one get past the argument check).
CLAUDE_FLAG_SETTINGS = {
    "disableAllHooks": True,
    "permissions": {"disableBypassPermissionsMode": "disable"},
}


def _claude_confinement(allowlist: str, mcp_config: Path) -> list[str]:
    # Each option is followed by one value only: --mcp-config and --allowedTools take several,
    # and would swallow whatever came after them.
    return [
        "--tools", "",
        "--setting-sources", "",
        "--settings", json.dumps(CLAUDE_FLAG_SETTINGS),
        "--mcp-config", str(mcp_config),
        "--allowedTools", allowlist,
        "--permission-mode", "default",
        "--strict-mcp-config",
        "--disable-slash-commands",
    ]  # fmt: skip


CONFINEMENTS = {"claude": _claude_confinement}
DESCRIPTIONS = {
    "claude": [
        'built-in tools: none (--tools "")',
        'settings sources: none (--setting-sources ""): no user, project or local settings, '
        "hooks, permission rules, plugins or MCP servers",
        "hooks: off, bypass mode disabled (--settings)",
        "MCP servers: virgo only (--mcp-config, --strict-mcp-config)",
        "skills and slash commands: off (--disable-slash-commands)",
        "permission mode: default (bypassPermissions and auto refused)",
        "network: its model only, no telemetry, error reports or updates "
        "(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC)",
    ]
}

CLAUDE = AgentCli(
    name="claude",
    title="Claude Code",
    programs=frozenset({"claude", "claude.exe"}),
    flags=frozenset(
        {
            "-p", "--print", "--verbose", "-c", "--continue", "--no-session-persistence",
            "--include-partial-messages", "--replay-user-messages", "--fork-session",
            "--ax-screen-reader", "--exclude-dynamic-system-prompt-sections", "-h", "--help",
            "-v", "--version",
        }
    ),
    valued=frozenset(
        {
            "--model", "--output-format", "--input-format", "--effort", "--append-system-prompt",
            "--system-prompt", "-r", "--resume", "--session-id", "--fallback-model",
            "--max-budget-usd", "-n", "--name", "--json-schema", "--max-turns", "--autocompact",
            "--system-prompt-snapshot", "--permission-mode",
        }
    ),
    allowed_values={
        "--permission-mode": frozenset({"default", "manual", "dontAsk", "plan", "acceptEdits"})
    },
    subcommands=frozenset(
        {
            "agents", "attach", "auth", "auto-mode", "doctor", "gateway", "import", "install",
            "logs", "mcp", "plugin", "plugins", "purge", "respawn", "rm", "setup-token", "stop",
            "kill", "ultrareview", "update", "upgrade",
        }
    ),
    # Telemetry, error reports and the auto-updater: the pinned CLI talks to its model only.
    environment={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
)  # fmt: skip

KNOWN: tuple[AgentCli, ...] = (CLAUDE,)


def known_cli(program: str) -> AgentCli | None:
    """The CLI a command's program is, by its name or the name its link resolves to."""
    names = {os.path.basename(program), os.path.basename(os.path.realpath(program))}
    for cli in KNOWN:
        if names & cli.programs:
            return cli
    return None


def known_names() -> str:
    return ", ".join(f"{cli.name} ({cli.title})" for cli in KNOWN)
