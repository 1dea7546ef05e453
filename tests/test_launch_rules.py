"""What `virgo launch` decides before and around the agent it starts, in this process (the live
tests run the agents): its refusals in one line, its warnings and audit event when the owner gives
confinement or the sandbox up, what `--check` says, the stdio block `mcp config` prints, and the
files and directories it makes owner-private (VX-CONF-1, VX-CONF-2, VX-SEC-6)."""

import io
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from personas.models import AuditEvent
from runtime.stamp import load_active_stamp
from serving import sandbox
from serving.agent_clis import CLAUDE, GEMINI
from serving.handoff import write_private, write_private_json
from serving.launcher import MANAGE_PY, agent_home, invocation, mcp_servers, run_directory
from serving.sandbox import Sandbox, SandboxUnavailable
from tests.runtime_support import standing_persona


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:  # type: ignore[no-untyped-def]
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def launch(persona: Any, *arguments: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("launch", "--persona", str(persona.uuid), *arguments, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("options", "program", "confined", "warnings"),
    [
        (["--unconfined", "--no-sandbox"], ["sh", "-c", "exit 3"], False,
         ["unconfined: the agent keeps its own tools and settings",
          "no sandbox: the agent can read the installation's secrets"]),
        (["--no-sandbox"], ["claude-stand-in"], True,
         ["no sandbox: the agent can read the installation's secrets"]),
    ],
)  # fmt: skip
def test_giving_confinement_up_is_warned_audited_and_the_agents_status_is_the_launchs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    program: list[str],
    confined: bool,
    warnings: list[str],
) -> None:
    """VX-CONF-1, VX-CONF-2: one warning line per thing given up, one audit event naming the
    persona, the program and what was given up, and the launch ends with the agent's status."""
    stand_in = tmp_path / "bin" / "claude"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\nexit 3\n")
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}:{os.environ['PATH']}")
    command = [str(stand_in)] if program == ["claude-stand-in"] else program
    persona = standing_persona()
    with pytest.raises(SystemExit) as ended:
        launch(persona, *options, "--", *command)
    assert ended.value.code == 3
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.UNCONFINED_LAUNCH)
    assert (event.persona, event.channel) == (persona, "cli")
    assert event.data == {
        "persona_name": persona.name,
        "program": os.path.basename(command[0]),
        "confined": confined,
        "sandboxed": False,
    }


@pytest.mark.django_db(transaction=True)
def test_the_warnings_are_on_stderr_one_line_each(tmp_path: Path) -> None:
    persona = standing_persona()
    stderr = io.StringIO()
    with pytest.raises(SystemExit):
        call_command(
            "launch", "--persona", str(persona.uuid), "--unconfined", "--no-sandbox", "--",
            "true", stdout=io.StringIO(), stderr=stderr,
        )  # fmt: skip
    assert stderr.getvalue().splitlines() == [
        f"warning: launching {persona.name} unconfined: the agent keeps its own tools and settings",
        f"warning: launching {persona.name} no sandbox: the agent can read the installation's "
        "secrets",
    ]


@pytest.mark.django_db
def test_a_missing_or_unknown_command_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    """VX-OPS-7: status 2 and one line that says what to do."""
    persona = standing_persona()
    with pytest.raises(CommandError) as missing:
        launch(persona)
    assert (str(missing.value), missing.value.returncode) == (
        "give the agent command after --, e.g. launch --persona X -- claude",
        2,
    )
    with pytest.raises(CommandError) as unknown:
        launch(persona, "--", "virgo-no-such-agent", "--flag")
    assert (str(unknown.value), unknown.value.returncode) == (
        "agent command 'virgo-no-such-agent' not found on PATH: install it, or give its full "
        "path after --",
        2,
    )
    with pytest.raises(CommandError) as nobody:
        launch(type("P", (), {"uuid": "no-such-persona"})(), "--", "true")
    assert str(nobody.value).startswith("--persona: ")


@pytest.mark.django_db
def test_check_of_an_unconfined_command_says_so_and_starts_in_the_workspace() -> None:
    """VX-CONF-1: --check names the program and that its own tools stay; the workspace it would
    start in is made owner-private."""
    persona = standing_persona()
    out, _ = launch(persona, "--check", "--unconfined", "--", "true")
    workspace = load_active_stamp(persona).workspace_root()
    assert "agent: true (unconfined: its own tools and settings stay)" in out.splitlines()
    assert (
        "MCP server: outside the agent, in this launcher, on 127.0.0.1 with a token made for "
        "the launch"
    ) in out.splitlines()
    assert f"starts in: {os.path.realpath(workspace)}" in out.splitlines()
    assert stat.S_IMODE(workspace.stat().st_mode) == 0o700
    out, _ = launch(persona, "--check", "--unconfined", "--no-sandbox", "--", "true")
    assert "sandbox: none (--no-sandbox): the agent can read whatever you can" in out.splitlines()


@pytest.mark.django_db
@pytest.mark.parametrize("dialect", ["claude", "json"])
def test_the_stdio_block_names_this_python_manage_py_and_the_settings_file(
    dialect: str,
) -> None:
    """VX-OPS-3, VX-SEC-6: what `mcp config` prints for a client Virgo does not launch."""
    persona = standing_persona()
    block = mcp_servers(persona, dialect=dialect)
    server = block["mcpServers"]["virgo"]
    expected = {
        "command": sys.executable,
        "args": [str(MANAGE_PY), "mcp", "serve", "--persona", str(persona.uuid)],
        "env": {
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "virgo.settings"),
            "VIRGO_ENV_FILE": str(run_directory(persona) / "server.env"),
        },
    }
    assert server == ({"type": "stdio", **expected} if dialect == "claude" else expected)
    assert next(iter(mcp_servers(persona)["mcpServers"]["virgo"])) == "type"


@pytest.mark.django_db
def test_the_invocation_marks_the_persona_and_the_sandboxs_own_tmp() -> None:
    """VX-CONF-2: a sandboxed agent's TMPDIR is the sandbox's own /tmp; unsandboxed it keeps none
    of the launcher's; VIRGO_PERSONA names the persona; the workspace is made 0700."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    box = Sandbox(writable=(), hidden=(), workdir=Path("/"))
    options: dict[str, Any] = {"cli": None, "server_url": "http://127.0.0.1:5/mcp", "token": "t"}
    boxed = invocation(persona, stamp, ["/bin/true"], sandbox=box, **options)
    assert boxed.env["TMPDIR"] == "/tmp"
    assert boxed.env["VIRGO_PERSONA"] == str(persona.uuid)
    assert boxed.argv[0] == sandbox.BWRAP
    bare = invocation(persona, stamp, ["/bin/true"], sandbox=None, **options)
    assert "TMPDIR" not in bare.env
    assert stat.S_IMODE(stamp.workspace_root().stat().st_mode) == 0o700


@pytest.mark.django_db
def test_gemini_reads_names_the_operator_may_not_pass(settings) -> None:  # type: ignore[no-untyped-def]
    """VX-CONF-1: the invocation applies the CLI's own refusals to VIRGO_LAUNCH_PASS_ENV."""
    settings.VIRGO_LAUNCH_PASS_ENV = ["GEMINI_API_KEY", "GEMINI_SYSTEM_MD"]
    persona = standing_persona()
    with pytest.raises(CommandError, match="VIRGO_LAUNCH_PASS_ENV names GEMINI_SYSTEM_MD"):
        invocation(
            persona, load_active_stamp(persona), ["/usr/bin/gemini"], cli=GEMINI, sandbox=None,
            server_url="http://127.0.0.1:5/mcp", token="t",
        )  # fmt: skip


def test_private_files_are_written_whole_with_their_directories_owner_only(
    tmp_path: Path,
) -> None:
    path = write_private_json(tmp_path / "a" / "b" / "config.json", {"k": ["v"]})
    assert path.read_text() == json.dumps({"k": ["v"]}, indent=2)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert write_private(path, "again").read_text() == "again"
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]


def test_the_operators_home_is_read_from_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings
) -> None:  # type: ignore[no-untyped-def]
    """VX-CONF-2: the credential files hidden are those of the HOME the launcher runs with."""
    operator = tmp_path / "operator"
    operator.mkdir()
    (operator / ".pgpass").write_text("*:*:*:*:pw")
    monkeypatch.setenv("HOME", str(operator))
    workspace, home = tmp_path / "w", tmp_path / "h"
    workspace.mkdir()
    home.mkdir()
    box = sandbox.build(workspace=workspace, agent_home=home, program="/bin/true")
    assert operator / ".pgpass" in box.hidden
    assert box.workdir == workspace
    assert (
        sandbox.build(
            workspace=workspace, agent_home=home, program="/bin/true", works_in="home"
        ).workdir
        == home
    )


def test_the_home_scan_is_bounded_and_goes_past_what_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-CONF-2: HOME_ENTRIES entries at most, HOME_DEPTH levels, and a directory it cannot
    list does not end the look at the others."""
    home = tmp_path / "operator"
    for name in (".a/.npmrc", ".b/c/d/.pgpass", ".c/.netrc"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("x")
    listdir = os.listdir

    def refusing(path: Any) -> list[str]:
        if str(path).endswith("/.a"):
            raise PermissionError(path)
        return listdir(path)

    monkeypatch.setattr(sandbox.os, "listdir", refusing)
    found = {p.relative_to(home).as_posix() for p in sandbox.secret_locations(home)
             if home in p.parents}  # fmt: skip
    assert found == {".c/.netrc"}
    monkeypatch.setattr(sandbox.os, "listdir", listdir)
    monkeypatch.setattr(sandbox, "HOME_ENTRIES", 4)
    found = {p.relative_to(home).as_posix() for p in sandbox.secret_locations(home)
             if home in p.parents}  # fmt: skip
    assert found == {".a/.npmrc"}


def test_every_sqlite_database_is_hidden() -> None:
    databases = [
        {"ENGINE": "django.db.backends.sqlite3", "NAME": Path("/srv/a.sqlite3")},
        {"ENGINE": "django.db.backends.sqlite3", "NAME": Path("/srv/b.sqlite3")},
    ]
    files = sandbox.database_files(databases)
    assert Path("/srv/a.sqlite3") in files and Path("/srv/b.sqlite3-wal") in files


def test_a_bwrap_that_cannot_even_run_and_one_that_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    silent = tmp_path / "bwrap"
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert sandbox.version() == "unknown"

    def cannot_run(*args: Any, **kwargs: Any) -> None:
        raise OSError(8, "Exec format error")

    monkeypatch.setattr(sandbox.subprocess, "run", cannot_run)
    with pytest.raises(SandboxUnavailable) as refused:
        sandbox.require_bwrap()
    assert refused.value.reason == "bwrap did not run: [Errno 8] Exec format error"
    assert str(refused.value) == refused.value.reason
    assert sandbox.version() == "unknown"


@pytest.mark.django_db
def test_only_a_cli_that_works_in_its_home_starts_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-CONF-2: Claude Code and an unconfined command start in the workspace, Gemini CLI in its
    home; and the stdio block names Virgo's settings module where the environment names none."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    options: dict[str, Any] = {
        "sandbox": None,
        "server_url": "http://127.0.0.1:5/mcp",
        "token": "t",
    }
    for cli in (CLAUDE, None):
        assert invocation(persona, stamp, ["/x"], cli=cli, **options).workdir == (
            stamp.workspace_root()
        )
    assert invocation(persona, stamp, ["/x"], cli=GEMINI, **options).workdir == agent_home(persona)
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    env = mcp_servers(persona)["mcpServers"]["virgo"]["env"]
    assert env["DJANGO_SETTINGS_MODULE"] == "virgo.settings"
