"""The launcher consumer of the stamp: an agent CLI that reaches exactly the stamped tools.

`virgo launch --persona <name> --print-allowlist` prints the allowlist in Claude Code's form,
`mcp__virgo__<name>` for each `tools[].name`, comma-separated. `virgo launch --persona <name> --
<agent command...>` runs the agent:

- confined (VX-CONF-1): a CLI Virgo knows (serving.agent_clis) gets the arguments and the files in
  its home that leave it exactly the stamp's tools and nothing from its settings sources; any
  other command is refused unless the owner passes `--unconfined`, which is warned and audited;
- sandboxed (VX-CONF-2): in bubblewrap (serving.sandbox), where the installation's secrets are
  not visible and only the persona's workspace and the agent's own home are writable; where the
  sandbox cannot be set up the launch is refused unless the owner passes `--no-sandbox`, which
  is warned and audited;
- served from outside: the persona's MCP server runs in this process, on a loopback port it
  bound itself, and answers only the bearer token made for this launch. The agent's MCP config
  (in its home, 0600; Gemini CLI's settings.json too) holds the URL and that token, never a
  secret of the installation, and is removed when the launch ends.

The agent gets an allow-listed environment, never the launcher's own: the basics of a shell
(serving.handoff.AGENT_ENV_NAMES, the locale's LC_*), VIRGO_PERSONA, VIRGO_ALLOWED_TOOLS,
VIRGO_MCP_CONFIG, and the names the operator lists in VIRGO_LAUNCH_PASS_ENV (its model API key,
say), but for those the confined CLI would read to load other settings or code
(AgentCli.refused_environment). Whatever
else the launcher holds (SECRET_KEY, DATABASE_URL, REDIS_URL, the hub's token and secret) stays
out.

`virgo mcp config` prints a stdio block (mcp_servers) for other MCP clients: that server needs
the installation's settings, which reach it through an owner-private file (`server.env`, 0600).
"""

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from personas.models import Persona
from runtime.stamp import ActiveStamp
from serving.agent_clis import CLAUDE, MCP_SERVER_NAME, AgentCli
from serving.handoff import (
    LoopbackServer,
    remote_mcp_config,
    visible_environment,
    write_private,
    write_private_json,
)
from serving.sandbox import Sandbox
from virgo.envfile import write_env_file

MANAGE_PY = Path(settings.BASE_DIR) / "manage.py"


def allowlist(stamp: ActiveStamp, cli: AgentCli | None = None) -> str:
    """Exactly tools[].name, from the launcher projection of the stamp file (V1-CONS-3), in the
    CLI's form; in Claude Code's where there is no CLI (--print-allowlist, an unconfined run)."""
    return ",".join((cli or CLAUDE).allowlist(stamp.allowlist))


ENV_FILE_VARIABLE = "VIRGO_ENV_FILE"


def server_settings() -> dict[str, str]:
    """What a stdio MCP server must be told: each setting read from the environment that is set
    here, and VIRGO_HOME as this process resolved it."""
    names = getattr(settings, "ENVIRONMENT_SETTINGS", ())
    values = {name: os.environ[name] for name in names if name in os.environ}
    values["VIRGO_HOME"] = str(settings.VIRGO_HOME)
    return values


def passed_names(cli: AgentCli | None = None) -> frozenset[str]:
    """The operator's VIRGO_LAUNCH_PASS_ENV; a name of the server's own settings is refused, and
    so are the names the confined CLI would read to load other settings or code."""
    reserved = {*getattr(settings, "ENVIRONMENT_SETTINGS", ()), ENV_FILE_VARIABLE}
    for name in settings.VIRGO_LAUNCH_PASS_ENV:
        if name in reserved:
            raise CommandError(
                f"VIRGO_LAUNCH_PASS_ENV names {name}, a setting of Virgo's own server, which "
                f"never reaches the agent: remove {name} from VIRGO_LAUNCH_PASS_ENV",
                returncode=2,
            )
    names = frozenset(settings.VIRGO_LAUNCH_PASS_ENV)
    if cli is not None and (refused := sorted(names & cli.refused_environment)):
        listed = ", ".join(refused)
        raise CommandError(
            f"VIRGO_LAUNCH_PASS_ENV names {listed}, which {cli.title} would read to load "
            f"settings, prompts or code beyond its confinement: remove {listed} from "
            "VIRGO_LAUNCH_PASS_ENV",
            returncode=2,
        )
    return names


def agent_environment(environ: Mapping[str, str], cli: AgentCli | None = None) -> dict[str, str]:
    """The part of `environ` the agent may see: the basics and the operator's names."""
    return visible_environment(environ, passed_names(cli))


def mcp_servers(persona: Persona, *, dialect: str = "claude") -> dict:
    """The `mcpServers` block that starts the persona's MCP server over stdio: what
    `virgo mcp config` prints (VX-OPS-3) for an MCP client Virgo does not launch.

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


def env_file_path(persona: Persona) -> Path:
    return run_directory(persona) / "server.env"


def agent_home(persona: Persona) -> Path:
    """The agent's own home: its CLI's state and sign-in, kept from one launch to the next,
    and nothing of the operator's or the installation's."""
    return run_directory(persona) / "agent-home"


def prepare_agent_home(persona: Persona) -> Path:
    """The agent's home, made owner-private with the run directory that holds it (beside the
    stdio server's `server.env`)."""
    for directory in (run_directory(persona), agent_home(persona)):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
    return agent_home(persona)


class LaunchServer(LoopbackServer):
    """The persona's MCP server for one launch, in this process (serving.handoff)."""

    def __init__(self, persona: Persona) -> None:
        from serving.mcp_server import build_server

        super().__init__(build_server(persona))

    def start(self) -> None:
        try:
            super().start()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Invocation:
    """What runs: the argv (inside the sandbox's, if any), its environment and working directory,
    and the files written for this launch alone, removed when it ends (the MCP config and the
    CLI's settings hold its token)."""

    argv: list[str]
    env: dict[str, str]
    mcp_config: Path
    workdir: Path
    written: tuple[Path, ...]


def invocation(
    persona: Persona,
    stamp: ActiveStamp,
    command: list[str],
    *,
    cli: AgentCli | None,
    sandbox: Sandbox | None,
    server_url: str,
    token: str,
) -> Invocation:
    """The argv, environment and working directory of a launch (nothing but its files is made
    here): the agent works in the persona's workspace, or in its home if its CLI works there,
    sandboxed or not."""
    tools = allowlist(stamp, cli)
    home = prepare_agent_home(persona)
    config = write_private_json(
        home / f".virgo-mcp-{os.getpid()}.json", remote_mcp_config(server_url, token)
    )
    written = [config]
    argv = list(command)
    env = agent_environment(os.environ, cli)
    if cli is not None:
        argv += cli.confinement(allowlist=tools, mcp_config=config)
        files = cli.home_files(home, url=server_url, token=token, tools=stamp.allowlist)
        written += [write_private(path, text) for path, text in files.items()]
        env.update(cli.environment)
    env.update(
        HOME=str(home),
        VIRGO_PERSONA=str(persona.uuid),
        VIRGO_ALLOWED_TOOLS=tools,
        VIRGO_MCP_CONFIG=str(config),
    )
    if sandbox is not None:
        env["TMPDIR"] = "/tmp"
        argv = sandbox.argv(argv)
    workspace = stamp.workspace_root()
    workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
    workdir = home if cli is not None and cli.works_in == "home" else workspace
    return Invocation(
        argv=argv, env=env, mcp_config=config, workdir=workdir, written=tuple(written)
    )
