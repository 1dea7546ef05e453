"""The sandbox of `virgo launch` (VX-CONF-2), tried from inside by a real process.

The agent here is tests/agents/probe.py, launched `--unconfined` (Virgo does not know how to
confine a Python script's tools, but the sandbox is the same for every agent): it tries to read
every place the installation keeps a secret, to write outside its workspace, to find a secret in
any process it can see, and to reach its MCP server with the launch's token and with a forged one.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.installation import SecretInstallation, secret_installation
from tests.runtime_support import REPO

PROBE = REPO / "tests/agents/probe.py"
WRITES = [str(REPO / "agent-was-here"), "/etc/agent-was-here", "inside.txt"]


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> SecretInstallation:
    return secret_installation(tmp_path_factory.mktemp("sandboxed"))


def probe(
    installation: SecretInstallation, *extra: str, write: bool = True
) -> tuple[subprocess.CompletedProcess[str], dict]:
    uuid = installation.standalone.personas["Deputy"]
    home = installation.home
    asked = {
        "read": [
            str(home / "virgo.env"),
            str(home / "virgo.sqlite3"),
            str(home / "run" / uuid / "server.env"),
            str(home / "personas" / uuid / "generations/1/CAPABILITY-STAMP.json"),
            installation.standalone.env["VIRGO_KEY_ENCRYPTION_KEY_FILE"],
            str(REPO / "var"),
        ],
        "write": WRITES if write else [],
    }
    launched = installation.standalone.run(
        "launch", "--persona", uuid, *extra, "--unconfined", "--",
        sys.executable, str(PROBE), json.dumps(asked),
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    return launched, json.loads(launched.stdout)


@pytest.mark.live
def test_nothing_the_sandboxed_agent_can_open_holds_a_secret(
    installation: SecretInstallation,
) -> None:
    """VX-CONF-2: virgo.env, the database file, server.env, the stamps, the key-encryption key's
    file and the checkout's var/ are not there; no process the agent sees carries a secret in
    its environment or command line, and none of its own output does."""
    launched, report = probe(installation)
    for path, outcome in report["read"].items():
        assert not outcome.startswith("read:"), (path, outcome)
        assert outcome in ("refused: FileNotFoundError", "listed: ") or outcome.startswith(
            "refused: PermissionError"
        ), (path, outcome)
    for name, value in installation.secrets().items():
        assert value not in launched.stdout, name
    assert len(report["processes"]) == 2, "the agent sees more than bwrap and itself"
    assert "SECRET_KEY" not in report["environment"]
    assert "VIRGO_KEY_ENCRYPTION_KEY_FILE" not in report["environment"]


@pytest.mark.live
def test_only_the_workspace_and_the_agents_home_are_writable(
    installation: SecretInstallation,
) -> None:
    """VX-CONF-2: a write to the checkout or /etc fails; one in the workspace (the agent's working
    directory) lands where the persona's workspace tools see it."""
    _, report = probe(installation)
    workspace = installation.workspace("Deputy")
    assert report["cwd"] == str(workspace)
    assert report["write"][str(REPO / "agent-was-here")].startswith("refused")
    assert report["write"]["/etc/agent-was-here"].startswith("refused")
    assert report["write"]["inside.txt"] == "written"
    assert (workspace / "inside.txt").read_text() == "written by the agent"
    assert not (REPO / "agent-was-here").exists()


@pytest.mark.live
def test_the_mcp_server_runs_outside_and_answers_only_the_launch_token(
    installation: SecretInstallation,
) -> None:
    """VX-CONF-2: the agent reaches its tools over loopback with the token in its MCP config,
    exactly the stamp's; a forged token gets 401."""
    _, report = probe(installation)
    stamp = json.loads(installation.standalone.stamp_bytes("Deputy"))
    names = [tool["name"] for tool in stamp["tools"]]
    assert report["mcp"] == {"listed": names, "forged_token_status": 401}
    config = report["environment"]["VIRGO_MCP_CONFIG"]
    assert Path(config).parent == installation.agent_home("Deputy")
    assert not Path(config).exists(), "the launch's token outlives the launch"


@pytest.mark.live
def test_no_sandbox_gives_the_secrets_up_and_says_so(installation: SecretInstallation) -> None:
    """VX-CONF-2: what the sandbox holds back, --no-sandbox hands over: the same probe reads
    virgo.env; the launch is warned on stderr and audited."""
    launched, report = probe(installation, "--no-sandbox", write=False)
    assert report["read"][str(installation.home / "virgo.env")].startswith("read: ")
    assert "no sandbox: the agent can read the installation's secrets" in launched.stderr
    audited = installation.standalone.run(
        "shell", "-c",
        "from personas.models import AuditEvent; "
        "print(AuditEvent.objects.filter(kind='unconfined-launch').latest('pk').data)",
    )  # fmt: skip
    assert "'sandboxed': False" in audited.stdout and "'confined': False" in audited.stdout
