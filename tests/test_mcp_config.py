"""VX-OPS-3: the MCP server config `virgo mcp config` prints works under a client that passes its
servers only a minimal environment, the mcp SDK's own `stdio_client` with its default one, and
it carries no secret."""

import json
from pathlib import Path

import anyio
import pytest
from django.core.management import call_command
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from serving.management.commands.mcp import CONFINED_ONLY_IN_ITS_TOOLS
from tests.runtime_support import Standalone, standing_persona, start_standalone

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


def printed_config(standalone: Standalone, uuid: str, *options: str) -> dict:
    done = standalone.run("mcp", "config", "--persona", uuid, *options)
    assert done.returncode == 0, done.stderr
    # VX-CONF-1: the person pasting it is told what it does not confine.
    assert done.stderr.strip() == CONFINED_ONLY_IN_ITS_TOOLS
    return json.loads(done.stdout)


def tools_listed_by_a_minimal_client(server: dict, cwd: Path) -> list[str]:
    """What the SDK's stdio client lists when it starts `server` as any MCP client configured
    with it would: its default environment plus the config's `env`, nothing of ours."""
    parameters = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=str(cwd)
    )

    async def listed() -> list[str]:
        with anyio.fail_after(120):
            async with (
                stdio_client(parameters) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return [tool.name for tool in (await session.list_tools()).tools]

    return anyio.run(listed)


@pytest.mark.parametrize("dialect", ["claude", "json"])
def test_the_printed_config_serves_exactly_the_stamps_tools_to_a_minimal_client(
    standalone: Standalone, dialect: str, tmp_path: Path
) -> None:
    """VX-OPS-3: started from the printed block alone (any working directory), under the SDK's
    default environment, the server lists exactly the tools of the persona's stamp."""
    uuid = standalone.personas["Deputy"]
    stamp_tools = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    [(name, server)] = printed_config(standalone, uuid, "--format", dialect)["mcpServers"].items()
    assert name == "virgo"
    assert ("type" in server) is (dialect == "claude")
    # The client passes its servers no setting of Virgo's: only these and the config's env.
    assert not {"SECRET_KEY", "DATABASE_URL", "VIRGO_HOME"} & set(get_default_environment())
    assert tools_listed_by_a_minimal_client(server, tmp_path) == stamp_tools


def test_the_config_carries_no_secret(standalone: Standalone) -> None:
    """VX-OPS-3: the block names the Python, manage.py and, in `env`, only the settings module
    and the owner-private file the server reads its settings from."""
    uuid = standalone.personas["Deputy"]
    printed = printed_config(standalone, uuid)
    server = printed["mcpServers"]["virgo"]
    assert set(server["env"]) == {"DJANGO_SETTINGS_MODULE", "VIRGO_ENV_FILE"}
    env_file = Path(server["env"]["VIRGO_ENV_FILE"])
    assert env_file == standalone.home / "run" / uuid / "server.env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    text = json.dumps(printed)
    for name in ("SECRET_KEY", "DATABASE_URL"):
        assert standalone.env[name] not in text
        assert f"{name}='{standalone.env[name]}'" in env_file.read_text()


@pytest.mark.django_db
def test_mcp_serve_on_a_terminal_says_what_it_waits_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43: pasted into a shell, `mcp serve` says it waits for an MCP client on stdin and
    stdout rather than wait in silence (its stdio service itself: tests/test_mcp_stdio.py);
    under a client, whose stdin is a pipe, it says nothing."""
    from serving.management.commands import mcp

    persona = standing_persona()
    served: list[object] = []
    monkeypatch.setattr(mcp.anyio, "run", lambda function, server: served.append(server))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    call_command("mcp", "serve", "--persona", str(persona.uuid))
    said = capsys.readouterr().err
    assert said.startswith(f"Serving the tools of {persona.name} over MCP on stdin and stdout")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    call_command("mcp", "serve", "--persona", str(persona.uuid))
    assert capsys.readouterr().err == "" and len(served) == 2
