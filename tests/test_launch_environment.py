"""What a launched agent and a configured MCP server are given: an allow-listed environment, and
a file.

The launcher's own environment holds the server's secrets (SECRET_KEY, the database and broker
URLs, the hub's token and secret). The agent gets none of them: only the basics of a shell, its
own HOME, the three VIRGO_* values it needs and what the operator lists in
VIRGO_LAUNCH_PASS_ENV. The stdio server `virgo mcp config` configures for other clients reads its
settings from an owner-private file, which the config's `env` names; nothing in that config or
the agent's environment carries a secret.
"""

import json
import os
import stat
from pathlib import Path

import anyio
import pytest
from django.conf import settings
from django.core.management import CommandError
from dotenv import dotenv_values
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from runtime.stamp import load_active_stamp
from serving.launcher import agent_home, invocation, mcp_servers
from tests.runtime_support import Standalone, standing_persona, start_standalone

SERVER_SECRETS = {
    "SECRET_KEY": "server-secret-key-" + "k" * 40,
    "VIRGO_CHANNEL_SECRET": "hub-callback-secret-" + "s" * 30,
    "VIRGO_CHANNEL_TOKEN": "hub-bearer-token-" + "t" * 30,
    "DATABASE_URL": "postgres://virgo:db-password-p4ss@127.0.0.1:5432/virgo",
    "REDIS_URL": "redis://:redis-password-r3d1s@127.0.0.1:6379/0",
}
NEVER_TO_THE_AGENT = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "VIRGO_CHANNEL_SECRET",
                      "VIRGO_CHANNEL_TOKEN")  # fmt: skip
BASICS = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/agent",
    "USER": "agent",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm-256color",
}
UNRELATED = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "GITHUB_TOKEN": "ghp_secret",
}


@pytest.fixture
def launcher_environment(monkeypatch: pytest.MonkeyPatch, settings) -> None:  # type: ignore[no-untyped-def]
    """The launcher's environment: the server's secrets, the basics, unrelated credentials and
    the agent's own API key, which the operator lists to be passed."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in {**SERVER_SECRETS, **BASICS, **UNRELATED}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-agents-own-key")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "virgo.test_settings")
    settings.VIRGO_LAUNCH_PASS_ENV = ["ANTHROPIC_API_KEY"]


def launched_env(persona) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return invocation(
        persona, load_active_stamp(persona), ["agent"], cli=None, sandbox=None,
        server_url="http://127.0.0.1:5/mcp", token="t",
    ).env  # fmt: skip


@pytest.mark.django_db
@pytest.mark.usefixtures("launcher_environment")
def test_the_agent_gets_an_allow_listed_environment() -> None:
    """VX-SEC-6: exactly the basics, the operator's names and the three VIRGO_* values: no
    server secret, database or broker URL, nor any other credential of the launcher."""
    persona = standing_persona()
    env = launched_env(persona)
    assert set(env) == {
        *(set(BASICS) - {"HOME"}),
        "HOME",
        "ANTHROPIC_API_KEY",
        "VIRGO_PERSONA",
        "VIRGO_ALLOWED_TOOLS",
        "VIRGO_MCP_CONFIG",
    }
    assert {name: env[name] for name in BASICS if name != "HOME"} == {
        name: value for name, value in BASICS.items() if name != "HOME"
    }
    assert env["HOME"] == str(agent_home(persona))
    assert env["ANTHROPIC_API_KEY"] == "the-agents-own-key"
    for value in (*SERVER_SECRETS.values(), *UNRELATED.values()):
        assert not any(value in passed for passed in env.values())


@pytest.mark.django_db
@pytest.mark.usefixtures("launcher_environment")
def test_the_server_reads_its_settings_from_an_owner_private_file() -> None:
    """VX-SEC-6: the stdio MCP config's env names only the settings module and the file; the
    file is 0600 and holds the settings the server's own settings read, nothing else."""
    persona = standing_persona()
    config_text = json.dumps(mcp_servers(persona))
    server_env = json.loads(config_text)["mcpServers"]["virgo"]["env"]
    assert set(server_env) == {"DJANGO_SETTINGS_MODULE", "VIRGO_ENV_FILE"}
    assert not any(value in config_text for value in SERVER_SECRETS.values())
    env_file = Path(server_env["VIRGO_ENV_FILE"])
    assert env_file.parent == Path(settings.VIRGO_HOME) / "run" / str(persona.uuid)
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(env_file.parent.stat().st_mode) == 0o700
    values = dotenv_values(env_file, interpolate=False)
    assert {name: values[name] for name in SERVER_SECRETS} == SERVER_SECRETS
    assert values["VIRGO_HOME"] == str(settings.VIRGO_HOME)
    assert set(values) <= {*settings.ENVIRONMENT_SETTINGS, "VIRGO_HOME"}
    for name in (*BASICS, *UNRELATED, "ANTHROPIC_API_KEY", "DJANGO_SETTINGS_MODULE"):
        assert name not in values


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "VIRGO_CHANNEL_TOKEN",
                                  "VIRGO_ENV_FILE"])  # fmt: skip
def test_the_operator_cannot_pass_a_server_setting_to_the_agent(settings, name: str) -> None:  # type: ignore[no-untyped-def]
    """VX-SEC-6: listing one of the server's own settings is refused, naming it and the fix."""
    settings.VIRGO_LAUNCH_PASS_ENV = ["ANTHROPIC_API_KEY", name]
    persona = standing_persona()
    with pytest.raises(CommandError, match=f"VIRGO_LAUNCH_PASS_ENV names {name}") as refused:
        launched_env(persona)
    assert refused.value.returncode == 2
    assert f"remove {name} from VIRGO_LAUNCH_PASS_ENV" in str(refused.value)


# Real processes: `virgo launch -- sh -c env`, and the MCP server from the written config --------


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


def with_server_secrets(standalone: Standalone) -> dict[str, str]:
    """The standalone's environment with every secret the server could hold. Its own SQLite
    DATABASE_URL stays; the broker and hub are addresses nothing listens on (launching and
    listing tools touch neither)."""
    return {
        **standalone.env,
        "SECRET_KEY": SERVER_SECRETS["SECRET_KEY"],
        "VIRGO_CHANNEL_URL": "http://127.0.0.1:9",
        "VIRGO_CHANNEL_SECRET": SERVER_SECRETS["VIRGO_CHANNEL_SECRET"],
        "VIRGO_CHANNEL_TOKEN": SERVER_SECRETS["VIRGO_CHANNEL_TOKEN"],
        "REDIS_URL": "redis://:redis-password-r3d1s@127.0.0.1:9/0",
    }


@pytest.mark.live
def test_launch_sh_c_env_shows_no_server_secret(standalone: Standalone) -> None:
    """VX-SEC-6: the agent process itself prints its environment: none of SECRET_KEY,
    VIRGO_CHANNEL_SECRET, VIRGO_CHANNEL_TOKEN, DATABASE_URL, REDIS_URL, by name or value."""
    env = with_server_secrets(standalone)
    uuid = standalone.personas["Deputy"]
    launched = Standalone(standalone.home, env, standalone.personas).run(
        "launch", "--persona", uuid, "--unconfined", "--", "sh", "-c", "env"
    )
    assert launched.returncode == 0, launched.stderr
    printed = dict(line.split("=", 1) for line in launched.stdout.splitlines() if "=" in line)
    for name in NEVER_TO_THE_AGENT:
        assert name not in printed
        assert env[name] not in launched.stdout
    assert printed["VIRGO_PERSONA"] == uuid
    assert printed["PATH"] == env["PATH"]


@pytest.mark.live
def test_the_mcp_server_runs_on_the_configs_environment_alone(
    standalone: Standalone, tmp_path: Path
) -> None:
    """VX-SEC-6, VX-OPS-3: the server started from the printed config with only that config's
    environment (and the SDK's minimal defaults) finds its database and VIRGO_HOME in the
    file and lists exactly the stamp's tools."""
    env = with_server_secrets(standalone)
    uuid = standalone.personas["Deputy"]
    printed = Standalone(standalone.home, env, standalone.personas).run(
        "mcp", "config", "--persona", uuid
    )
    assert printed.returncode == 0, printed.stderr
    config = json.loads(printed.stdout)
    server = config["mcpServers"]["virgo"]
    env_file = Path(server["env"]["VIRGO_ENV_FILE"])
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert dotenv_values(env_file)["DATABASE_URL"] == env["DATABASE_URL"]
    parameters = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=str(tmp_path)
    )

    async def scenario() -> tuple[list[str], dict]:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = [tool.name for tool in (await session.list_tools()).tools]
            written = await session.call_tool(
                "workspace_write", {"path": "memory/env.md", "content": "from the file"}
            )
            return listed, written.structuredContent

    listed, written = anyio.run(scenario)
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    assert listed == names
    assert written["ok"] is True
    workspace = standalone.home / "workspaces/work/core" / uuid / "memory/env.md"
    assert workspace.read_text() == "from the file"
