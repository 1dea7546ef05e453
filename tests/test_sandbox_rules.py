"""The rules serving.sandbox builds a launch's sandbox from (VX-CONF-2), without starting one:
what is hidden, what stays writable, and bwrap's command line. tests/test_launch_sandbox.py runs
the real bwrap."""

import os
from pathlib import Path

import pytest
from django.conf import settings

from serving import sandbox
from serving.sandbox import Sandbox, SandboxUnavailable, build, hidden_paths, secret_locations


def test_the_command_line_hides_before_it_binds_and_runs_the_command_last(tmp_path: Path) -> None:
    """VX-CONF-2: the whole filesystem read-only, fresh /dev /proc /tmp, no shared process,
    IPC, host name or cgroup namespace, a session of its own, no capability; then what /tmp must
    still show, then the hidden places (a directory emptied, a file nulled), then the writable
    ones, and the command after `--`, in the workspace."""
    hidden_dir, hidden_file = tmp_path / "home", tmp_path / "kek"
    hidden_dir.mkdir()
    hidden_file.write_text("k")
    box = Sandbox(
        writable=(Path("/w/workspace"), Path("/w/agent-home")),
        hidden=(hidden_dir, hidden_file),
        workdir=Path("/w/workspace"),
        restored=(Path("/tmp/checkout"),),
    )
    assert box.argv(["claude", "-p", "x"]) == [
        "bwrap",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--new-session",
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--ro-bind", "/tmp/checkout", "/tmp/checkout",
        "--tmpfs", str(hidden_dir),
        "--ro-bind", "/dev/null", str(hidden_file),
        "--bind", "/w/workspace", "/w/workspace",
        "--bind", "/w/agent-home", "/w/agent-home",
        "--chdir", "/w/workspace",
        "--", "claude", "-p", "x",
    ]  # fmt: skip


def test_hidden_paths_are_real_existing_and_outermost(tmp_path: Path) -> None:
    """VX-CONF-2: a missing path is left out, a link is hidden where it leads, and a path inside
    one already hidden is not hidden again."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    (home / "virgo.env").write_text("x")
    link = tmp_path / "link-to-home"
    link.symlink_to(home)
    other = tmp_path / "other.env"
    other.write_text("x")
    chosen = hidden_paths(
        [home / "virgo.env", tmp_path / "missing", link, other, home / "run"], keep=()
    )
    assert chosen == (home, other)


def test_a_kept_path_inside_a_hidden_one_is_bound_back_but_a_secret_inside_it_refuses(
    tmp_path: Path,
) -> None:
    """VX-CONF-2: the workspace lives under VIRGO_HOME (hidden, then bound back); a secret file
    inside the workspace cannot be hidden from an agent that may write there, so the launch is
    refused rather than pretend."""
    home = tmp_path / "home"
    workspace = home / "workspaces/w"
    workspace.mkdir(parents=True)
    assert hidden_paths([home], keep=[workspace]) == (home,)
    (workspace / "kek").write_text("k")
    with pytest.raises(SandboxUnavailable) as refused:
        hidden_paths([workspace / "kek"], keep=[workspace])
    assert refused.value.reason == (
        f"{workspace / 'kek'} holds a secret of the installation inside {workspace}, which the "
        "agent may write: move it out of the workspace"
    )
    with pytest.raises(SandboxUnavailable):
        hidden_paths([workspace], keep=[workspace])


@pytest.fixture
def installation(tmp_path: Path, settings, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    settings.VIRGO_HOME = tmp_path / "home"
    settings.ENVIRONMENT_SETTINGS = {"VIRGO_KEY_ENCRYPTION_KEY_FILE", "VIRGO_PROFILE"}
    monkeypatch.setenv("VIRGO_KEY_ENCRYPTION_KEY_FILE", str(tmp_path / "kek"))
    monkeypatch.setenv("VIRGO_PROFILE", str(tmp_path / "not-a-secret"))
    monkeypatch.setenv("VIRGO_ENV_FILE", str(tmp_path / "server.env"))
    return tmp_path


def test_every_place_the_installation_keeps_a_secret_is_a_candidate(installation: Path) -> None:
    """VX-CONF-2: VIRGO_HOME, the checkout's var/, the env file, each *_FILE setting (and no
    other setting), the database files, and the database servers' sockets."""
    found = secret_locations(None)
    assert found[:4] == [
        installation / "home",
        Path(settings.BASE_DIR) / "var",
        installation / "server.env",
        installation / "kek",
    ]
    assert installation / "not-a-secret" not in found
    databases = sandbox.database_files(settings.DATABASES.values())
    assert found[4:] == [*databases, *(Path(d) for d in sandbox.SERVER_SOCKET_DIRECTORIES)]


def test_without_an_env_file_or_a_file_setting_nothing_is_added_for_them(
    installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VIRGO_ENV_FILE")
    monkeypatch.setenv("VIRGO_KEY_ENCRYPTION_KEY_FILE", "")
    assert secret_locations(None) == [
        installation / "home",
        Path(settings.BASE_DIR) / "var",
        *sandbox.database_files(settings.DATABASES.values()),
        *(Path(d) for d in sandbox.SERVER_SOCKET_DIRECTORIES),
    ]


def test_sqlite_files_and_their_journals_are_hidden_not_a_server_nor_memory() -> None:
    """VX-CONF-2: the database file holds every sealed key and token hash."""
    databases = [
        {"ENGINE": "django.db.backends.sqlite3", "NAME": Path("/srv/virgo/db.sqlite3")},
        {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        {"ENGINE": "django.db.backends.postgresql", "NAME": "virgo"},
    ]
    assert sandbox.database_files(databases) == [
        Path("/srv/virgo/db.sqlite3"),
        Path("/srv/virgo/db.sqlite3-wal"),
        Path("/srv/virgo/db.sqlite3-shm"),
        Path("/srv/virgo/db.sqlite3-journal"),
    ]


def test_the_operators_credential_files_are_candidates_and_nothing_else_of_its_home(
    tmp_path: Path,
) -> None:
    """VX-CONF-2: the credential catalogue the workspace tools refuse by name, applied to the
    operator's home and its dot-directories: `.pgpass`, `.ssh`, `.npmrc`, `.config/gh/hosts.yml`,
    not the rest, and not inside the operator's projects."""
    home = tmp_path / "operator"
    names = (".pgpass", ".ssh/id_ed25519", ".npmrc", ".bashrc", "notes.txt",
             ".config/gh/hosts.yml", ".config/nvim/init.lua", "projects/.env")  # fmt: skip
    for name in names:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("x")
    found = {
        path.relative_to(home).as_posix() for path in secret_locations(home) if home in path.parents
    }
    assert found == {".pgpass", ".ssh", ".ssh/id_ed25519", ".npmrc", ".config/gh/hosts.yml"}


def test_a_home_that_cannot_be_read_adds_nothing(tmp_path: Path) -> None:
    home = tmp_path / "missing"
    assert [path for path in secret_locations(home) if home in path.parents] == []


def test_build_binds_the_workspace_and_home_and_restores_only_what_lies_under_tmp(
    tmp_path: Path,
    settings,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    """VX-CONF-2: writable = the workspace and the agent's home, the agent starts in the
    workspace; the program's directory comes back into the empty /tmp only if it lies there."""
    settings.VIRGO_HOME = tmp_path / "home"
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    workspace = tmp_path / "home/workspaces/w"
    agent_home = tmp_path / "home/run/p/agent-home"
    for directory in (workspace, agent_home):
        directory.mkdir(parents=True)
    box = build(workspace=workspace, agent_home=agent_home, program="/usr/bin/env")
    assert box.writable == (workspace, agent_home)
    assert box.workdir == workspace
    assert tmp_path / "home" in box.hidden
    under_tmp = Path(os.path.realpath(settings.BASE_DIR)).is_relative_to("/tmp")
    assert box.restored == ((Path(os.path.realpath(settings.BASE_DIR)),) if under_tmp else ())
    program = tmp_path / "bin/claude"
    program.parent.mkdir()
    program.write_text("")
    box = build(workspace=workspace, agent_home=agent_home, program=str(program))
    assert (program.parent in box.restored) is tmp_path.is_relative_to("/tmp")


def test_without_bwrap_the_reason_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "BWRAP", "virgo-no-such-bwrap")
    with pytest.raises(SandboxUnavailable) as refused:
        sandbox.require_bwrap()
    assert refused.value.reason == (
        "bubblewrap (bwrap) is not installed: install bubblewrap (apt-get install bubblewrap)"
    )
    assert sandbox.version() == "unknown"


@pytest.mark.parametrize(
    ("stderr", "said"),
    [("bwrap: setting up uid map: denied", "bwrap: setting up uid map: denied"),
     ("", "no reason given")],
)  # fmt: skip
def test_a_bwrap_that_fails_is_refused_with_its_last_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stderr: str, said: str
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\nprintf 'first line\\n{stderr}' >&2\nexit 1\n" if stderr else
                    "#!/bin/sh\nexit 1\n")  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(SandboxUnavailable) as refused:
        sandbox.require_bwrap()
    assert refused.value.reason.startswith(f"bwrap cannot set up a sandbox here ({said}): ")


def test_a_working_bwrap_is_found_and_reports_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe runs bwrap's own command line for an empty sandbox: a stand-in that checks it
    got one and exits 0 is taken."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap 9.9"; exit 0; }\n'
        'case "$*" in *"--unshare-pid"*"-- true") exit 0;; esac\nexit 3\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert sandbox.require_bwrap() == str(fake)
    assert sandbox.version() == "bubblewrap 9.9"
