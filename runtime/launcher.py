"""The launcher consumer of the stamp: an agent CLI started with exactly the stamped tools.

`virgo launch --persona <uuid> --print-allowlist` prints the allowlist in the agent CLI's form,
`mcp__virgo__<name>` for each `tools[].name`, comma-separated. `virgo launch --persona <uuid> --
<agent command...>` execs the agent command with `--allowedTools <allowlist> --mcp-config <file>
--strict-mcp-config` appended (the Claude Code CLI's flags), and the same two values in
VIRGO_ALLOWED_TOOLS and VIRGO_MCP_CONFIG for agents configured through the environment.

The MCP config names one server, `virgo`, started as `manage.py mcp serve --persona <uuid>` with
this Python. It holds no secret: the server inherits DATABASE_URL, SECRET_KEY and the rest from
the agent's environment, which is the launcher's own.
"""

import json
import os
import sys
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from personas.models import Persona
from runtime.stamp import ActiveStamp

MCP_SERVER_NAME = "virgo"
MANAGE_PY = Path(settings.BASE_DIR) / "manage.py"


def persona_by_uuid(value: str) -> Persona:
    try:
        return Persona.objects.select_related("agent__owner").get(uuid=value)
    except (Persona.DoesNotExist, ValidationError, ValueError):
        raise CommandError(f"no persona with uuid {value!r}") from None


def allowlist(stamp: ActiveStamp) -> str:
    """Exactly tools[].name, from the launcher projection of the stamp file (V1-CONS-3)."""
    return ",".join(f"mcp__{MCP_SERVER_NAME}__{name}" for name in stamp.allowlist)


def mcp_config(persona: Persona) -> dict:
    return {
        "mcpServers": {
            MCP_SERVER_NAME: {
                "type": "stdio",
                "command": sys.executable,
                "args": [str(MANAGE_PY), "mcp", "serve", "--persona", str(persona.uuid)],
                "env": {
                    "DJANGO_SETTINGS_MODULE": os.environ.get(
                        "DJANGO_SETTINGS_MODULE", "virgo.settings"
                    ),
                    "VIRGO_HOME": str(settings.VIRGO_HOME),
                },
            }
        }
    }


def config_path(persona: Persona) -> Path:
    return Path(settings.VIRGO_HOME) / "run" / str(persona.uuid) / "mcp-config.json"


def write_mcp_config(persona: Persona) -> Path:
    """Write the MCP config owner-private and atomically: a launch never reads half a file."""
    path = config_path(persona)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(mcp_config(persona), handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def agent_invocation(
    persona: Persona, stamp: ActiveStamp, command: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment the agent command is exec'd with."""
    tools = allowlist(stamp)
    config = write_mcp_config(persona)
    argv = [*command, "--allowedTools", tools, "--mcp-config", str(config), "--strict-mcp-config"]
    env = {
        **os.environ,
        "VIRGO_PERSONA": str(persona.uuid),
        "VIRGO_ALLOWED_TOOLS": tools,
        "VIRGO_MCP_CONFIG": str(config),
    }
    return argv, env
