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

from runtime import sandbox
from tests.live import unavailable
from tests.runtime_support import REPO, Standalone, start_standalone

PROBE = REPO / "tests/agents/probe.py"
WRITES = [str(REPO / "agent-was-here"), "/etc/agent-was-here", "inside.txt"]


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    """A standalone Virgo holding every kind of secret: SECRET_KEY and a broker password in its
    environment, a key-encryption key in a file a setting names, `virgo.env` in its home, the
    SQLite file, and a stdio server's `server.env` (written by `mcp config`)."""
    try:
        sandbox.require_bwrap()
    except sandbox.SandboxUnavailable as exc:
        unavailable(exc.reason)
    base = tmp_path_factory.mktemp("sandboxed")
    (base / "home").mkdir()
    standalone = start_standalone(base / "home")
    kek_file = base / "kek"
    kek = subprocess.run(
        [sys.executable, "-m", "virgo.kek"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    kek_file.write_text(kek + "\n")
    kek_file.chmod(0o600)
    (standalone.home / "virgo.env").write_text("VIRGO_PROBE_SECRET=home-env-secret-h0m3\n")
    (standalone.home / "virgo.env").chmod(0o600)
    env = {
        **standalone.env,
        "VIRGO_KEY_ENCRYPTION_KEY_FILE": str(kek_file),
        "REDIS_URL": "redis://:redis-password-r3d1s@127.0.0.1:9/0",
    }
    installation = Standalone(standalone.home, env, standalone.personas)
    configured = installation.run("mcp", "config", "--persona", "Deputy")
    assert configured.returncode == 0, configured.stderr
    return installation


def secrets_of(installation: Standalone) -> dict[str, str]:
    kek_file = Path(installation.env["VIRGO_KEY_ENCRYPTION_KEY_FILE"])
    return {
        "SECRET_KEY": installation.env["SECRET_KEY"],
        "key-encryption key": kek_file.read_text().strip(),
        "broker password": "redis-password-r3d1s",
        "home virgo.env": "home-env-secret-h0m3",
    }


def probe(
    installation: Standalone, *extra: str, write: bool = True
) -> tuple[subprocess.CompletedProcess[str], dict]:
    uuid = installation.personas["Deputy"]
    home = installation.home
    asked = {
        "read": [
            str(home / "virgo.env"),
            str(home / "virgo.sqlite3"),
            str(home / "run" / uuid / "server.env"),
            str(home / "personas" / uuid / "generations/1/CAPABILITY-STAMP.json"),
            installation.env["VIRGO_KEY_ENCRYPTION_KEY_FILE"],
            str(REPO / "var"),
        ],
        "write": WRITES if write else [],
    }
    launched = installation.run(
        "launch", "--persona", uuid, *extra, "--unconfined", "--",
        sys.executable, str(PROBE), json.dumps(asked),
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    return launched, json.loads(launched.stdout)


@pytest.mark.live
def test_nothing_the_sandboxed_agent_can_open_holds_a_secret(installation: Standalone) -> None:
    """VX-CONF-2: virgo.env, the database file, server.env, the stamps, the key-encryption key's
    file and the checkout's var/ are not there; no process the agent sees carries a secret in
    its environment or command line, and none of its own output does."""
    launched, report = probe(installation)
    for path, outcome in report["read"].items():
        assert not outcome.startswith("read:"), (path, outcome)
        assert outcome in ("refused: FileNotFoundError", "listed: ") or outcome.startswith(
            "refused: PermissionError"
        ), (path, outcome)
    for name, value in secrets_of(installation).items():
        assert value not in launched.stdout, name
    assert len(report["processes"]) == 2, "the agent sees more than bwrap and itself"
    assert "SECRET_KEY" not in report["environment"]
    assert "VIRGO_KEY_ENCRYPTION_KEY_FILE" not in report["environment"]


@pytest.mark.live
def test_only_the_workspace_and_the_agents_home_are_writable(installation: Standalone) -> None:
    """VX-CONF-2: a write to the checkout or /etc fails; one in the workspace (the agent's working
    directory) lands where the persona's workspace tools see it."""
    _, report = probe(installation)
    uuid = installation.personas["Deputy"]
    workspace = installation.home / "workspaces/work/core" / uuid
    assert report["cwd"] == str(workspace)
    assert report["write"][str(REPO / "agent-was-here")].startswith("refused")
    assert report["write"]["/etc/agent-was-here"].startswith("refused")
    assert report["write"]["inside.txt"] == "written"
    assert (workspace / "inside.txt").read_text() == "written by the agent"
    assert not (REPO / "agent-was-here").exists()


@pytest.mark.live
def test_the_mcp_server_runs_outside_and_answers_only_the_launch_token(
    installation: Standalone,
) -> None:
    """VX-CONF-2: the agent reaches its tools over loopback with the token in its MCP config,
    exactly the stamp's; a forged token gets 401."""
    _, report = probe(installation)
    names = [tool["name"] for tool in json.loads(installation.stamp_bytes("Deputy"))["tools"]]
    assert report["mcp"] == {"listed": names, "forged_token_status": 401}
    config = report["environment"]["VIRGO_MCP_CONFIG"]
    assert Path(config).parent == installation.home / "run" / installation.personas["Deputy"] / (
        "agent-home"
    )
    assert not Path(config).exists(), "the launch's token outlives the launch"


@pytest.mark.live
def test_no_sandbox_gives_the_secrets_up_and_says_so(installation: Standalone) -> None:
    """VX-CONF-2: what the sandbox holds back, --no-sandbox hands over: the same probe reads
    virgo.env; the launch is warned on stderr and audited."""
    launched, report = probe(installation, "--no-sandbox", write=False)
    assert report["read"][str(installation.home / "virgo.env")].startswith("read: ")
    assert "no sandbox: the agent can read the installation's secrets" in launched.stderr
    audited = installation.run(
        "shell", "-c",
        "from personas.models import AuditEvent; "
        "print(AuditEvent.objects.filter(kind='unconfined-launch').latest('pk').data)",
    )  # fmt: skip
    assert "'sandboxed': False" in audited.stdout and "'confined': False" in audited.stdout
