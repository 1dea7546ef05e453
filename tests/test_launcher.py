"""The launcher: exactly tools[].name as the allowlist, the MCP server configured, or no start."""

import io
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from personas.models import AuditEvent
from runtime.stamp import load_active_stamp
from serving import sandbox
from serving.agent_clis import CLAUDE, GEMINI
from serving.launcher import agent_home, allowlist, invocation
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
def test_the_invocation_confines_claude_with_its_own_flags_after_the_owners() -> None:
    """VX-CONF-1, V1-CONS-3: the owner's arguments, then Claude Code's confinement: no built-in
    tool, no settings source, hooks off, only Virgo's server (by a 0600 config naming the launch's
    URL and token), exactly the allowlist; the same values in the environment."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    launch = invocation(
        persona, stamp, ["/usr/bin/claude", "-p", "hello"], cli=CLAUDE, sandbox=None,
        server_url="http://127.0.0.1:5/mcp", token="launch-token",
    )  # fmt: skip
    config = launch.mcp_config
    assert launch.argv == [
        "/usr/bin/claude", "-p", "hello",
        "--tools", "",
        "--setting-sources", "",
        "--settings",
        '{"disableAllHooks": true, "permissions": {"disableBypassPermissionsMode": "disable"}}',
        "--mcp-config", str(config),
        "--allowedTools", allowlist(stamp),
        "--permission-mode", "default",
        "--strict-mcp-config",
        "--disable-slash-commands",
    ]  # fmt: skip
    assert launch.env["VIRGO_ALLOWED_TOOLS"] == allowlist(stamp)
    assert launch.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert launch.env["HOME"] == str(agent_home(persona)) == str(config.parent)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(config.parent.parent.stat().st_mode) == 0o700
    assert json.loads(config.read_text()) == {
        "mcpServers": {
            "virgo": {
                "type": "http",
                "url": "http://127.0.0.1:5/mcp",
                "headers": {"Authorization": "Bearer launch-token"},
            }
        }
    }


@pytest.mark.django_db
def test_an_unconfined_command_gets_no_other_clis_flags() -> None:
    """VX-CONF-1: flags of one CLI are never appended to another program: an unconfined command
    runs as given, the allowlist and config reaching it only through the environment."""
    persona = standing_persona()
    launch = invocation(
        persona, load_active_stamp(persona), ["/usr/bin/codex", "exec", "hi"], cli=None,
        sandbox=None, server_url="http://127.0.0.1:5/mcp", token="t",
    )  # fmt: skip
    assert launch.argv == ["/usr/bin/codex", "exec", "hi"]
    assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" not in launch.env
    assert launch.env["VIRGO_MCP_CONFIG"] == str(launch.mcp_config)


@pytest.mark.django_db
def test_the_invocation_confines_gemini_by_its_settings_in_its_home() -> None:
    """VX-CONF-1, V1-CONS-3: the owner's arguments, then `-e none`; Gemini CLI's settings.json
    (0600) naming exactly the stamp's tools, Virgo's server only (the launch's URL and token) and
    everything else off; an empty .env beside it; the agent starts in its home, and in the
    sandbox too, where the workspace stays bound writable."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    home = agent_home(persona)
    box = sandbox.build(
        workspace=stamp.workspace_root(), agent_home=home, program="/usr/bin/env", works_in="home"
    )
    launch = invocation(
        persona, stamp, ["/usr/bin/gemini", "-p", "hello"], cli=GEMINI, sandbox=box,
        server_url="http://127.0.0.1:5/mcp", token="launch-token",
    )  # fmt: skip
    real_home, real_workspace = os.path.realpath(home), os.path.realpath(stamp.workspace_root())
    assert launch.argv[-6:] == ["--", "/usr/bin/gemini", "-p", "hello", "-e", "none"]
    assert launch.argv[launch.argv.index("--chdir") + 1] == real_home
    assert ["--bind", real_workspace, real_workspace] == launch.argv[
        launch.argv.index(real_workspace) - 1 : launch.argv.index(real_workspace) + 2
    ]
    assert launch.workdir == home
    settings_file, env_file = home / ".gemini/settings.json", home / ".gemini/.env"
    assert launch.written == (launch.mcp_config, settings_file, env_file)
    tools = [f"mcp_virgo_{name}" for name in stamp.allowlist]
    assert launch.env["VIRGO_ALLOWED_TOOLS"] == ",".join(tools) == allowlist(stamp, GEMINI)
    assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" not in launch.env
    for written in (settings_file, env_file):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings_file.parent.stat().st_mode) == 0o700
    assert env_file.read_text() == ""
    assert json.loads(settings_file.read_text()) == {
        "security": {
            "auth": {"selectedType": "gemini-api-key"},
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
        "tools": {"core": tools, "useRipgrep": False},
        "mcp": {"allowed": ["virgo"]},
        "mcpServers": {
            "virgo": {
                "httpUrl": "http://127.0.0.1:5/mcp",
                "headers": {"Authorization": "Bearer launch-token"},
                "includeTools": list(stamp.allowlist),
            }
        },
        "hooksConfig": {"enabled": False},
        "skills": {"enabled": False},
        "experimental": {"enableAgents": False},
        "useWriteTodos": False,
    }


@pytest.fixture
def programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory first on PATH holding stand-ins named `claude`, `codex` and `gemini` that
    leave a mark if they ever run."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("claude", "codex", "gemini"):
        program = directory / name
        program.write_text(f"#!/bin/sh\ntouch {tmp_path}/{name}-ran\n")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    return tmp_path


def launch(persona, *arguments: str) -> str:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    call_command("launch", "--persona", str(persona.uuid), *arguments, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize("program", ["codex", "python3"])
def test_a_command_virgo_cannot_confine_is_refused_naming_the_ones_it_can(
    programs: Path, program: str
) -> None:
    """VX-CONF-1: refused in one line (status 2) that names the CLIs Virgo confines and the way
    out; the program never runs and nothing is audited."""
    persona = standing_persona()
    with pytest.raises(CommandError) as refused:
        launch(persona, "--", program)
    assert refused.value.returncode == 2
    assert str(refused.value) == (
        f"{program} is not an agent CLI Virgo can confine (it knows claude (Claude Code), gemini "
        "(Gemini CLI)): its own tools would reach past the stamp; pass --unconfined to run it "
        "anyway"
    )
    assert not (programs / f"{program}-ran").exists()
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.UNCONFINED_LAUNCH).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--dangerously-skip-permissions"], "--dangerously-skip-permissions"),
        (["--allow-dangerously-skip-permissions"], "--allow-dangerously-skip-permissions"),
        (["--permission-mode", "bypassPermissions"], "--permission-mode bypassPermissions"),
        (["--permission-mode=auto"], "--permission-mode auto"),
        (["--tools", "Bash,Read"], "--tools"),
        (["--allowedTools", "Bash"], "--allowedTools"),
        (["--settings", '{"hooks": {}}'], "--settings"),
        (["--setting-sources", "user,project"], "--setting-sources"),
        (["--mcp-config", ".mcp.json"], "--mcp-config"),
        (["--add-dir", "/"], "--add-dir"),
        (["--plugin-dir", "plugins"], "--plugin-dir"),
        (["--agents", "{}"], "--agents"),
        (["--chrome"], "--chrome"),
        (["-p", "hi", "--model"], "--model needs a value"),
        (["-p", "hi", "--"], "-- would make the CLI ignore the confinement that follows it"),
        (["mcp", "add", "other", "--", "x"], "'mcp' is a Claude Code subcommand"),
        (["plugin", "install", "x"], "'plugin' is a Claude Code subcommand"),
    ],
)
def test_the_owners_arguments_cannot_undo_claudes_confinement(
    programs: Path, arguments: list[str], named: str
) -> None:
    """VX-CONF-1: bypass modes, other tools, settings, servers, directories, plugins and the
    CLI's own configuring subcommands are refused before anything starts."""
    persona = standing_persona()
    with pytest.raises(CommandError, match="refusing to launch Claude Code") as refused:
        launch(persona, "--", "claude", *arguments)
    assert named in str(refused.value)
    assert refused.value.returncode == 2
    assert not (programs / "claude-ran").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["-y"], "-y"),
        (["--approval-mode", "yolo"], "--approval-mode yolo"),
        (["-s"], "-s"),
        (["-e", "planted"], "-e"),
        (["--policy", "allow.toml"], "--policy"),
        (["--allowed-mcp-server-names", "other"], "--allowed-mcp-server-names"),
        (["--include-directories", "/"], "--include-directories"),
        (["-r", "--yolo"], "-r --yolo: Gemini CLI would read --yolo as an option of its own"),
        (["-p", "hi", "--"], "-- would make the CLI ignore the confinement that follows it"),
        (["mcp", "add", "other", "sh"], "'mcp' is a Gemini CLI subcommand"),
        (["extensions", "install", "x"], "'extensions' is a Gemini CLI subcommand"),
    ],
)
def test_the_owners_arguments_cannot_undo_geminis_confinement(
    programs: Path, arguments: list[str], named: str
) -> None:
    """VX-CONF-1: YOLO, its own sandbox, extensions, policies, other servers and directories and
    the CLI's configuring subcommands are refused before anything starts."""
    persona = standing_persona()
    with pytest.raises(CommandError, match="refusing to launch Gemini CLI") as refused:
        launch(persona, "--", "gemini", *arguments)
    assert named in str(refused.value)
    assert refused.value.returncode == 2
    assert not (programs / "gemini-ran").exists()


@pytest.mark.django_db
def test_names_gemini_reads_to_load_other_settings_or_code_are_never_passed_to_it(
    programs: Path, settings
) -> None:
    """VX-CONF-1: listed in VIRGO_LAUNCH_PASS_ENV, they refuse a Gemini CLI launch in one line
    that names them and the fix; its model's key and base URL pass, and Claude Code, which reads
    none of them, is not refused for them."""
    settings.VIRGO_LAUNCH_PASS_ENV = [
        "GEMINI_API_KEY", "NODE_OPTIONS", "GOOGLE_GEMINI_BASE_URL", "GEMINI_SYSTEM_MD",
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    ]  # fmt: skip
    persona = standing_persona()
    with pytest.raises(CommandError) as refused:
        launch(persona, "--check", "--", "gemini", "-p", "hi")
    assert refused.value.returncode == 2
    assert str(refused.value) == (
        "VIRGO_LAUNCH_PASS_ENV names GEMINI_CLI_SYSTEM_SETTINGS_PATH, GEMINI_SYSTEM_MD, "
        "NODE_OPTIONS, which Gemini CLI would read to load settings, prompts or code beyond its "
        "confinement: remove GEMINI_CLI_SYSTEM_SETTINGS_PATH, GEMINI_SYSTEM_MD, NODE_OPTIONS "
        "from VIRGO_LAUNCH_PASS_ENV"
    )
    assert not (programs / "gemini-ran").exists()
    assert "agent: Claude Code (confined)" in launch(persona, "--check", "--", "claude")
    for name in ("GEMINI_CLI_HOME", "GEMINI_SANDBOX", "CODE_ASSIST_ENDPOINT"):
        settings.VIRGO_LAUNCH_PASS_ENV = ["GEMINI_API_KEY", name]
        with pytest.raises(CommandError, match=f"names {name}, which Gemini CLI"):
            launch(persona, "--check", "--", "gemini")
    settings.VIRGO_LAUNCH_PASS_ENV = ["GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"]
    assert "agent: Gemini CLI (confined)" in launch(persona, "--check", "--", "gemini")


@pytest.mark.django_db
def test_the_owners_harmless_arguments_pass(programs: Path) -> None:
    """VX-CONF-1: a prompt, print mode, a model, an output format and a safe permission mode are
    the owner's to choose."""
    persona = standing_persona()
    printed = launch(
        persona, "--check", "--", "claude", "-p", "review the queue", "--model", "sonnet",
        "--output-format=json", "--permission-mode", "plan", "--verbose",
    )  # fmt: skip
    assert "agent: Claude Code (confined)" in printed
    printed = launch(
        persona, "--check", "--", "gemini", "-p", "review the queue", "-m", "gemini-2.5-pro",
        "--output-format=json", "--approval-mode", "plan", "-r", "latest", "-d",
    )  # fmt: skip
    assert "agent: Gemini CLI (confined)" in printed


@pytest.mark.django_db
def test_check_prints_tools_settings_and_sandbox_without_starting_anything(
    programs: Path,
) -> None:
    """VX-CONF-1, VX-CONF-2: the effective tools (exactly the stamp's), the settings that are
    off, the server outside and the sandbox's writable and hidden places; the agent never runs
    and nothing is audited."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    printed = launch(persona, "--check", "--", "claude")
    tools = allowlist(stamp).split(",")
    assert f"tools: {len(tools)}, exactly the stamp's: {', '.join(tools)}" in printed
    assert 'built-in tools: none (--tools "")' in printed
    assert "MCP servers: virgo only" in printed
    assert f"writable: {stamp.workspace_root()}, {agent_home(persona)}" in printed
    hidden = printed.split("\nhidden: ")[1].strip().split(", ")
    assert os.path.realpath(settings.VIRGO_HOME) in hidden
    assert not (programs / "claude-ran").exists()
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.UNCONFINED_LAUNCH).exists()


@pytest.mark.django_db
def test_check_prints_geminis_tools_and_settings_as_it_will_get_them(programs: Path) -> None:
    """VX-CONF-1: the tools in Gemini CLI's form, exactly the stamp's, and what its settings
    turn off; the agent never runs and no file is written in its home."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    printed = launch(persona, "--check", "--", "gemini")
    tools = [f"mcp_virgo_{name}" for name in stamp.allowlist]
    assert "agent: Gemini CLI (confined)" in printed
    assert f"tools: {len(tools)}, exactly the stamp's: {', '.join(tools)}" in printed
    for line in GEMINI.settings_described():
        assert f"\n{line}\n" in printed
    assert f"writable: {stamp.workspace_root()}, {agent_home(persona)}" in printed
    assert f"\nstarts in: {os.path.realpath(agent_home(persona))}\n" in printed
    assert not (programs / "gemini-ran").exists()
    assert not (agent_home(persona) / ".gemini").exists()


@pytest.mark.django_db
def test_without_bubblewrap_the_launch_is_refused_with_the_fix(
    programs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-CONF-2: no sandbox, no launch, unless the owner gives it up with --no-sandbox."""
    monkeypatch.setattr(sandbox, "BWRAP", "virgo-no-such-bwrap")
    persona = standing_persona()
    with pytest.raises(CommandError) as refused:
        launch(persona, "--check", "--", "claude")
    assert str(refused.value) == (
        "refusing to launch without the sandbox: bubblewrap (bwrap) is not installed: install "
        "bubblewrap (apt-get install bubblewrap); or pass --no-sandbox to run the agent where "
        "it can read the installation's secrets"
    )
    printed = launch(persona, "--check", "--no-sandbox", "--", "claude")
    assert "sandbox: none (--no-sandbox): the agent can read whatever you can" in printed


@pytest.mark.django_db
def test_a_bwrap_that_cannot_set_up_a_sandbox_is_refused_with_its_reason(
    programs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-CONF-2: bwrap present but failing (no user namespaces) is a refusal naming its reason."""
    failing = tmp_path / "bin" / "bwrap"
    failing.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    persona = standing_persona()
    with pytest.raises(CommandError) as refused:
        launch(persona, "--check", "--", "claude")
    assert "bwrap cannot set up a sandbox here (bwrap: No permissions to create new namespace)" in (
        str(refused.value)
    )


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Standalone:
    return start_standalone(tmp_path_factory.mktemp("standalone"))


@pytest.mark.live
def test_a_real_launch_runs_claude_confined_in_the_sandbox(
    standalone: Standalone, tmp_path: Path
) -> None:
    """VX-CONF-1, V1-CONS-3: a real `launch -- claude` process (a stand-in that prints what it
    was given): the confinement after the owner's arguments, the allowlist, its own home."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    expected = ",".join(f"mcp__virgo__{name}" for name in names)
    printed = standalone.run("launch", "--persona", uuid, "--print-allowlist")
    assert (printed.returncode, printed.stdout.strip()) == (0, expected)
    claude = tmp_path / "claude"
    claude.write_text(f"#!{sys.executable}\n{PRINT_ARGV}\n")
    claude.chmod(0o755)
    launched = standalone.run("launch", "--persona", uuid, "--", str(claude), "-p", "hi")
    assert launched.returncode == 0, launched.stderr
    argv, env = json.loads(launched.stdout)
    assert argv[:2] == ["-p", "hi"]
    assert argv[argv.index("--allowedTools") + 1] == expected
    assert argv[argv.index("--tools") + 1] == ""
    assert (env["VIRGO_ALLOWED_TOOLS"], env["VIRGO_PERSONA"]) == (expected, uuid)
    assert env["HOME"] == str(standalone.home / "run" / uuid / "agent-home")


GEMINI_STAND_IN = """
import json, os, sys
home = os.environ["HOME"]
settings = json.load(open(os.path.join(home, ".gemini/settings.json")))
open(os.path.join(sys.argv[1], "written-by-the-agent"), "w").close()
print(json.dumps([sys.argv[2:], os.getcwd(), settings["mcpServers"]["virgo"]["includeTools"]]))
"""


@pytest.mark.live
def test_a_real_launch_runs_gemini_in_its_home_in_the_sandbox_and_removes_its_settings(
    standalone: Standalone, tmp_path: Path
) -> None:
    """VX-CONF-1, VX-CONF-2: a real `launch -- gemini` process (a stand-in that reads the
    settings it was given): `-e none` after the owner's arguments, started in its home inside
    the sandbox, the workspace still writable; the settings and .env are gone afterwards."""
    uuid = standalone.personas["Deputy"]
    names = [tool["name"] for tool in json.loads(standalone.stamp_bytes("Deputy"))["tools"]]
    home = standalone.home / "run" / uuid / "agent-home"
    workspace = standalone.home / "workspaces/work/core" / uuid
    gemini = tmp_path / "gemini"
    gemini.write_text(f"#!{sys.executable}\n{GEMINI_STAND_IN}")
    gemini.chmod(0o755)
    launched = standalone.run(
        "launch", "--persona", uuid, "--", str(gemini), str(workspace), "-p", "hi"
    )
    assert launched.returncode == 0, launched.stderr
    argv, cwd, included = json.loads(launched.stdout)
    assert (argv, cwd, included) == (["-p", "hi", "-e", "none"], str(home), names)
    assert (workspace / "written-by-the-agent").exists()
    assert not (home / ".gemini/settings.json").exists()
    assert not (home / ".gemini/.env").exists()
    assert not list(home.glob(".virgo-mcp-*.json"))


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
