"""The agent CLIs `virgo launch` knows how to confine (VX-CONF-1), each in its own way.

A CLI is known by the name of the program the command runs. For each, Virgo adds the arguments
(and, for a CLI whose tools are set only in its settings, writes those in the agent's home) that
leave the agent exactly the stamp's tools (no built-in tool, no MCP server but Virgo's, no
settings source whose hooks, permission rules, plugins or servers could add to them) and refuses
the owner's arguments that would undo that. The owner's arguments are checked against the options
known to be harmless, not against a list of harmful ones: an option a later release adds is
refused until someone has looked at it.

Codex CLI is not known yet (docs/decisions.md): `launch` refuses it, as it refuses any other
command, unless the owner asks for an unconfined launch.
"""

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

MCP_SERVER_NAME = "virgo"

# Where the agent starts: its persona's workspace, or its own home (for a CLI that would load a
# project's settings from the directory it starts in).
type WorksIn = Literal["workspace", "home"]


class RefusedArgument(Exception):
    """An argument of the owner's that would widen what the agent reaches."""


@dataclass(frozen=True, slots=True)
class AgentCli:
    """One agent CLI and how it is confined."""

    name: str
    title: str
    programs: frozenset[str]
    # How the CLI names a tool of Virgo's MCP server: the prefix before the tool's own name.
    tool_prefix: str
    # Options that take no value, and options whose value follows (or comes after `=`).
    flags: frozenset[str]
    valued: frozenset[str]
    # Values an option may take, where only some of them are harmless.
    allowed_values: dict[str, frozenset[str]] = field(default_factory=dict)
    subcommands: frozenset[str] = frozenset()
    # Whether the CLI reads the argument after a valued option as its value even when it starts
    # with `-`. A parser that does not (yargs, for an option whose value is optional) would read
    # `-r --yolo` as two options where the check saw one.
    reads_dashed_values: bool = True
    works_in: WorksIn = "workspace"
    # Set in the agent's environment: what the CLI reads there to stay quiet and in place.
    environment: dict[str, str] = field(default_factory=dict)
    # What the CLI reads from its environment to load other settings, prompts, code or sandboxes:
    # never passed to it, even when the operator lists the name in VIRGO_LAUNCH_PASS_ENV.
    refused_environment: frozenset[str] = frozenset()

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
                if value.startswith("-") and not self.reads_dashed_values:
                    raise RefusedArgument(
                        f"{name} {value}: {self.title} would read {value} as an option of its "
                        f"own: write {name}={value}"
                    )
            allowed = self.allowed_values.get(name)
            if allowed is not None and value not in allowed:
                raise RefusedArgument(
                    f"{name} {value} would widen what the agent may do: use one of "
                    f"{', '.join(sorted(allowed))}"
                )

    def allowlist(self, tools: Sequence[str]) -> list[str]:
        """The stamp's tools (tools[].name) as this CLI names them."""
        return [f"{self.tool_prefix}{name}" for name in tools]

    def confinement(self, *, allowlist: str, mcp_config: Path) -> list[str]:
        """The arguments that confine this CLI to the stamp's tools and Virgo's server."""
        return CONFINEMENTS[self.name](allowlist, mcp_config)

    def home_files(
        self, home: Path, *, url: str, token: str, tools: Sequence[str]
    ) -> dict[Path, str]:
        """What this CLI must find in its home for one launch, each file's path and text: the
        launcher writes them owner-private before the agent starts and removes them after."""
        files = HOME_FILES.get(self.name)
        return {} if files is None else files(home, url, token, tools)

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


def _gemini_confinement(allowlist: str, mcp_config: Path) -> list[str]:
    # Gemini CLI takes its tools and servers from its settings only (its home_files); on the
    # command line only the extensions, which would bring servers, hooks and context of their own.
    return ["-e", "none"]


GEMINI_SETTINGS = Path(".gemini/settings.json")
# Found first, so Gemini CLI stops there instead of searching the directories above for a `.env`
# that could set GEMINI_SYSTEM_MD (a system prompt of the file's choosing) and the like.
GEMINI_ENV = Path(".gemini/.env")
# Headless, Gemini CLI needs an auth type chosen: the API key the operator passes through
# VIRGO_LAUNCH_PASS_ENV, unless the owner signed in otherwise in the agent's home.
GEMINI_DEFAULT_AUTH = "gemini-api-key"


def gemini_settings(*, url: str, token: str, tools: Sequence[str], auth: str) -> dict[str, Any]:
    """Gemini CLI's user settings for one launch. Started in the agent's home, it reads no project
    settings beside them (they would be this same file)."""
    return {
        "security": {
            "auth": {"selectedType": auth},
            # On, a headless session refuses a folder no one has trusted, and what is trusted is
            # kept in a file of its own (trustedFolders.json).
            "folderTrust": {"enabled": False},
            "disableYoloMode": True,
            "disableAlwaysAllow": True,
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "ide": {"enabled": False},
        "ui": {"showHomeDirectoryWarning": False},
        "context": {"includeDirectoryTree": False},
        # Exactly the stamp's tools: no built-in tool is registered unless named here, and each
        # name becomes an allow rule above the deny-all that a core list adds. No search tool
        # left, so no looking for ripgrep (and saying it fell back to another).
        "tools": {"core": GEMINI.allowlist(tools), "useRipgrep": False},
        "mcp": {"allowed": [MCP_SERVER_NAME]},
        "mcpServers": {
            MCP_SERVER_NAME: {
                "httpUrl": url,
                "headers": {"Authorization": f"Bearer {token}"},
                "includeTools": list(tools),
            }
        },
        "hooksConfig": {"enabled": False},
        "skills": {"enabled": False},
        "experimental": {"enableAgents": False},
        "useWriteTodos": False,
    }


def owners_gemini_auth(home: Path) -> str:
    """The auth type the owner chose in the agent's home (`gemini` run there by hand), if any."""
    try:
        existing = json.loads((home / GEMINI_SETTINGS).read_text())
    except (OSError, ValueError):
        return GEMINI_DEFAULT_AUTH
    auth = existing.get("security", {}) if isinstance(existing, dict) else {}
    auth = auth.get("auth", {}) if isinstance(auth, dict) else {}
    chosen = auth.get("selectedType") if isinstance(auth, dict) else None
    return chosen if isinstance(chosen, str) and chosen else GEMINI_DEFAULT_AUTH


def _gemini_home_files(home: Path, url: str, token: str, tools: Sequence[str]) -> dict[Path, str]:
    settings = gemini_settings(url=url, token=token, tools=tools, auth=owners_gemini_auth(home))
    return {home / GEMINI_SETTINGS: json.dumps(settings, indent=2), home / GEMINI_ENV: ""}


CONFINEMENTS = {"claude": _claude_confinement, "gemini": _gemini_confinement}
HOME_FILES = {"gemini": _gemini_home_files}
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
    ],
    "gemini": [
        "built-in tools: none (tools.core lists only the stamp's, in the agent's "
        "~/.gemini/settings.json, written for each launch)",
        "settings: only that file: the agent starts in its own home, so no project's "
        ".gemini/settings.json, hooks, tools or MCP servers load",
        "hooks, skills and subagents: off (hooksConfig, skills, experimental.enableAgents)",
        "MCP servers: virgo only (mcp.allowed, mcpServers)",
        "extensions: none (-e none)",
        "approval: YOLO mode and always-allow disabled (-y and --approval-mode yolo refused)",
        ".env: an empty ~/.gemini/.env, so none in the directories above is read",
        "network: its model only, no telemetry, usage statistics, updates or IDE",
    ],
}

CLAUDE = AgentCli(
    name="claude",
    title="Claude Code",
    programs=frozenset({"claude", "claude.exe"}),
    tool_prefix=f"mcp__{MCP_SERVER_NAME}__",
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

GEMINI_OUTPUT_FORMATS = frozenset({"text", "json", "stream-json"})
GEMINI_APPROVAL_MODES = frozenset({"default", "plan", "auto_edit"})

GEMINI = AgentCli(
    name="gemini",
    title="Gemini CLI",
    # npm links bin/gemini to the package's bundle/gemini.js.
    programs=frozenset({"gemini", "gemini.js"}),
    tool_prefix=f"mcp_{MCP_SERVER_NAME}_",
    flags=frozenset({"-d", "--debug", "--screen-reader", "-h", "--help", "-v", "--version"}),
    valued=frozenset(
        {
            "-p", "--prompt", "-m", "--model", "-o", "--output-format", "-r", "--resume",
            "--session-id", "--approval-mode",
        }
    ),
    allowed_values={
        "-o": GEMINI_OUTPUT_FORMATS,
        "--output-format": GEMINI_OUTPUT_FORMATS,
        "--approval-mode": GEMINI_APPROVAL_MODES,
    },
    subcommands=frozenset(
        {"mcp", "extensions", "extension", "skills", "skill", "hooks", "hook", "gemma"}
    ),
    reads_dashed_values=False,
    # In a workspace, non-interactive mode loads the project's .gemini/settings.json whatever
    # the trust settings say: its tools, hooks and servers.
    works_in="home",
    refused_environment=frozenset(
        {
            # Other settings, trust, system prompts and experiment flags than Virgo's.
            "GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
            "GEMINI_SYSTEM_MD", "GEMINI_WRITE_SYSTEM_MD", "GEMINI_EXP",
            # Its own sandbox: a container started with mounts, flags and commands of its own.
            "GEMINI_SANDBOX", "GEMINI_SANDBOX_IMAGE", "GEMINI_SANDBOX_PROXY_COMMAND",
            "SANDBOX_FLAGS", "SANDBOX_MOUNTS", "SANDBOX_ENV", "SANDBOX_PORTS",
            "SEATBELT_PROFILE", "BUILD_SANDBOX",
            # Code loaded into node, and other endpoints than the model's.
            "NODE_OPTIONS", "CODE_ASSIST_ENDPOINT", "GEMINI_CLI_ACTIVITY_LOG_TARGET",
            # An IDE's server (with tools of its own, or a command to start it).
            "GEMINI_CLI_IDE_SERVER_PORT", "GEMINI_CLI_IDE_SERVER_STDIO_COMMAND",
            "GEMINI_CLI_IDE_SERVER_STDIO_ARGS", "GEMINI_CLI_IDE_WORKSPACE_PATH",
            "GEMINI_CLI_IDE_AUTH_TOKEN", "GEMINI_CLI_IDE_PID",
            # Telemetry, which the settings turn off and these would turn on again.
            "GEMINI_TELEMETRY_ENABLED", "GEMINI_TELEMETRY_TARGET",
            "GEMINI_TELEMETRY_OTLP_ENDPOINT", "GEMINI_TELEMETRY_OTLP_PROTOCOL",
            "GEMINI_TELEMETRY_LOG_PROMPTS", "GEMINI_TELEMETRY_OUTFILE",
            "GEMINI_TELEMETRY_USE_COLLECTOR", "GEMINI_TELEMETRY_USE_CLI_AUTH",
            "GEMINI_TELEMETRY_TRACES_ENABLED",
        }
    ),
)  # fmt: skip

KNOWN: tuple[AgentCli, ...] = (CLAUDE, GEMINI)


def known_cli(program: str) -> AgentCli | None:
    """The CLI a command's program is, by its name or the name its link resolves to."""
    names = {os.path.basename(program), os.path.basename(os.path.realpath(program))}
    for cli in KNOWN:
        if names & cli.programs:
            return cli
    return None


def known_names() -> str:
    return ", ".join(f"{cli.name} ({cli.title})" for cli in KNOWN)
