"""The launcher consumer of the stamp: an agent CLI started with exactly the stamped tools.

`virgo launch --persona <uuid> --print-allowlist` prints the allowlist in the agent CLI's form,
`mcp__virgo__<name>` for each `tools[].name`, comma-separated. `virgo launch --persona <uuid> --
<agent command...>` execs the agent command with `--allowedTools <allowlist> --mcp-config <file>
--strict-mcp-config` appended (the Claude Code CLI's flags), and the same two values in
VIRGO_ALLOWED_TOOLS and VIRGO_MCP_CONFIG for agents configured through the environment.

The agent gets an allow-listed environment, never the launcher's own: the basics of a shell
(AGENT_ENV_NAMES, the locale's LC_*), VIRGO_PERSONA, VIRGO_ALLOWED_TOOLS, VIRGO_MCP_CONFIG, and
the names the operator lists in VIRGO_LAUNCH_PASS_ENV (its model API key, say). Whatever else
the launcher holds (SECRET_KEY, DATABASE_URL, REDIS_URL, the hub's token and secret) stays out.

The MCP config names one server, `virgo`, started as `manage.py mcp serve --persona <uuid>` with
this Python; `virgo mcp config` prints the same block (mcp_servers) for any MCP client. The
server needs those settings; they reach it through an owner-private file beside the config
(`server.env`, 0600): every setting virgo.settings reads from the environment, as the launcher
has it. The config's `env` names only that file (VIRGO_ENV_FILE) and the settings module that
loads it (virgo.envfile).
"""

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from personas.models import Persona
from runtime.stamp import ActiveStamp
from virgo.envfile import write_env_file

MCP_SERVER_NAME = "virgo"
MANAGE_PY = Path(settings.BASE_DIR) / "manage.py"


# The personas `launch` and `mcp` may name: any, since whoever runs them holds the installation's
# database and keys (the runtime's stamp, not the command line, is what confines a persona).
ANY_PERSONA = Persona.objects.select_related("agent__owner")


def allowlist(stamp: ActiveStamp) -> str:
    """Exactly tools[].name, from the launcher projection of the stamp file (V1-CONS-3)."""
    return ",".join(f"mcp__{MCP_SERVER_NAME}__{name}" for name in stamp.allowlist)


# The basics every CLI expects: where programs and home are, who the user is, the locale and the
# terminal. Nothing here configures Virgo or carries a credential (SSH_AUTH_SOCK, proxies with
# passwords and the like pass only when the operator lists them).
AGENT_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "TZ",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    }
)
AGENT_ENV_PREFIXES = ("LC_",)
ENV_FILE_VARIABLE = "VIRGO_ENV_FILE"


def server_settings() -> dict[str, str]:
    """What the MCP server must be told: each setting read from the environment that is set
    here, and VIRGO_HOME as this process resolved it."""
    names = getattr(settings, "ENVIRONMENT_SETTINGS", ())
    values = {name: os.environ[name] for name in names if name in os.environ}
    values["VIRGO_HOME"] = str(settings.VIRGO_HOME)
    return values


def passed_names() -> frozenset[str]:
    """The operator's VIRGO_LAUNCH_PASS_ENV; a name of the server's own settings is refused."""
    reserved = {*getattr(settings, "ENVIRONMENT_SETTINGS", ()), ENV_FILE_VARIABLE}
    for name in settings.VIRGO_LAUNCH_PASS_ENV:
        if name in reserved:
            raise CommandError(
                f"VIRGO_LAUNCH_PASS_ENV names {name}, a setting of Virgo's own server, which "
                f"never reaches the agent: remove {name} from VIRGO_LAUNCH_PASS_ENV",
                returncode=2,
            )
    return frozenset(settings.VIRGO_LAUNCH_PASS_ENV)


def agent_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of `environ` the agent may see: the basics and the operator's names."""
    allowed = AGENT_ENV_NAMES | passed_names()
    return {
        name: value
        for name, value in environ.items()
        if name in allowed or name.startswith(AGENT_ENV_PREFIXES)
    }


def mcp_servers(persona: Persona, *, dialect: str = "claude") -> dict:
    """The `mcpServers` block that starts the persona's MCP server: what `launch` writes and
    `virgo mcp config` prints (VX-OPS-3).

    The server's settings go first to its owner-private file (server.env); the block names only
    that file and the settings module, never a secret, so it works under a client that passes
    the server nothing but a minimal environment. `claude` is Claude Code's form (`.mcp.json`,
    `--mcp-config`: with `"type": "stdio"`), `json` the plain one most other clients read.
    """
    env_file = write_env_file(env_file_path(persona), server_settings())
    server: dict = {
        "command": sys.executable,
        "args": [str(MANAGE_PY), "mcp", "serve", "--persona", str(persona.uuid)],
        "env": {
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "virgo.settings"),
            ENV_FILE_VARIABLE: str(env_file),
        },
    }
    if dialect == "claude":
        server = {"type": "stdio", **server}
    return {"mcpServers": {MCP_SERVER_NAME: server}}


def run_directory(persona: Persona) -> Path:
    return Path(settings.VIRGO_HOME) / "run" / str(persona.uuid)


def config_path(persona: Persona) -> Path:
    return run_directory(persona) / "mcp-config.json"


def env_file_path(persona: Persona) -> Path:
    return run_directory(persona) / "server.env"


def write_mcp_config(persona: Persona) -> Path:
    """Write the server's settings file and the MCP config naming it, owner-private and
    atomically: a launch never reads half a file."""
    config = mcp_servers(persona)
    path = config_path(persona)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(config, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def agent_invocation(
    persona: Persona, stamp: ActiveStamp, command: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment the agent command is exec'd with."""
    tools = allowlist(stamp)
    env = agent_environment(os.environ)
    config = write_mcp_config(persona)
    argv = [*command, "--allowedTools", tools, "--mcp-config", str(config), "--strict-mcp-config"]
    env.update(
        VIRGO_PERSONA=str(persona.uuid),
        VIRGO_ALLOWED_TOOLS=tools,
        VIRGO_MCP_CONFIG=str(config),
    )
    return argv, env
