"""The launcher: exactly tools[].name as the allowlist, the MCP server configured, or no start."""

import io
import json
import stat
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runtime.launcher import agent_invocation, allowlist
from runtime.stamp import load_active_stamp
from stamps.projections import launcher_allowlist
from stamps.storage import stamp_path
from tests.factories import stop_standing, update_persona
from tests.runtime_support import Standalone, standing_persona, start_standalone

PRINT_ARGV = "import json, os, sys; print(json.dumps([sys.argv[1:], dict(os.environ)]))"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def printed_allowlist(persona) -> str:
    out = io.StringIO()
    call_command("launch", "--persona", str(persona.uuid), "--print-allowlist", stdout=out)
    return out.getvalue().strip()


@pytest.mark.django_db
def test_the_allowlist_is_exactly_the_stamps_tools_in_the_cli_form() -> None:
    """V1-CONS-3, V1-ACC-1: mcp__virgo__<name>, comma-separated, for exactly tools[].name."""
    persona = standing_persona(extra=("trigger_webhook",))
    data = stamp_path(persona.uuid, persona.generation).read_bytes()
    names = [tool["name"] for tool in json.loads(data)["tools"]]
    assert printed_allowlist(persona) == ",".join(f"mcp__virgo__{name}" for name in names)
    assert list(launcher_allowlist(data)) == names
    persona = update_persona(
        persona, verb_subset=[v for v in persona.verb_subset if v != "trigger_webhook"]
    )
    assert "mcp__virgo__trigger_webhook" not in printed_allowlist(persona).split(",")


@pytest.mark.django_db
@pytest.mark.parametrize("damage", ["altered", "not standing"])
def test_the_launcher_refuses_to_start_naming_the_reason(damage: str) -> None:
    """V1-BOOT-1: altered or not standing: no launch, and the reason is named."""
    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    if damage == "altered":
        path.write_bytes(path.read_bytes()[:-1] + b" }")
    else:
        persona = stop_standing(persona, "workspace_write")
    with pytest.raises(CommandError, match=damage):
        call_command("launch", "--persona", str(persona.uuid), "--print-allowlist")
    with pytest.raises(CommandError, match=damage):
        call_command("mcp", "serve", "--persona", str(persona.uuid))


@pytest.mark.django_db
def test_an_unknown_persona_or_a_missing_command_is_refused() -> None:
    with pytest.raises(CommandError, match="no persona"):
        call_command("launch", "--persona", "not-a-uuid", "--print-allowlist")
    persona = standing_persona()
    with pytest.raises(CommandError, match="agent command"):
        call_command("launch", "--persona", str(persona.uuid))


@pytest.mark.django_db
def test_the_invocation_carries_allowlist_and_an_owner_private_mcp_config() -> None:
    """V1-CONS-3: flags for the agent CLI and the same values in the environment."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    argv, env = agent_invocation(persona, stamp, ["claude", "-p", "hello"])
    config = Path(env["VIRGO_MCP_CONFIG"])
    assert argv == [
        "claude",
        "-p",
        "hello",
        "--allowedTools",
        allowlist(stamp),
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
    ]
    assert env["VIRGO_ALLOWED_TOOLS"] == allowlist(stamp)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    server = json.loads(config.read_text())["mcpServers"]["virgo"]
    assert server["command"] == sys.executable
    assert server["args"][-4:] == ["mcp", "serve", "--persona", str(persona.uuid)]
    assert "SECRET_KEY" not in server["env"] and "DATABASE_URL" not in server["env"]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


@pytest.mark.live
def test_launch_execs_the_agent_with_the_allowlist_and_mcp_config(standalone: Standalone) -> None:
    """V1-CONS-3: a real `launch -- <agent>` process, exec'd with the flags."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    expected = ",".join(f"mcp__virgo__{name}" for name in names)
    printed = standalone.run("launch", "--persona", uuid, "--print-allowlist")
    assert (printed.returncode, printed.stdout.strip()) == (0, expected)
    launched = standalone.run("launch", "--persona", uuid, "--", sys.executable, "-c", PRINT_ARGV)
    assert launched.returncode == 0, launched.stderr
    argv, env = json.loads(launched.stdout)
    config = standalone.home / "run" / uuid / "mcp-config.json"
    assert argv == [
        "--allowedTools",
        expected,
        "--mcp-config",
        str(config),
        "--strict-mcp-config",
    ]
    assert (env["VIRGO_ALLOWED_TOOLS"], env["VIRGO_PERSONA"]) == (expected, uuid)
    assert json.loads(config.read_text())["mcpServers"]["virgo"]["args"][-1] == uuid


@pytest.mark.live
def test_a_real_launch_refuses_an_altered_stamp(standalone: Standalone) -> None:
    """V1-BOOT-1: the process exits non-zero and says why; the agent never starts."""
    uuid = standalone.personas["Broken"]
    path = standalone.home / "personas" / uuid / "generations/1/CAPABILITY-STAMP.json"
    path.write_bytes(path.read_bytes() + b" ")
    launched = standalone.run("launch", "--persona", uuid, "--", sys.executable, "-c", PRINT_ARGV)
    assert launched.returncode != 0
    assert "altered" in launched.stderr and launched.stdout == ""
    served = standalone.run("mcp", "serve", "--persona", uuid)
    assert served.returncode != 0 and "altered" in served.stderr
