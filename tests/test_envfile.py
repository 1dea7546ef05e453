"""virgo.envfile: owner-private settings files, written atomically, read through python-dotenv."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from dotenv import dotenv_values

from virgo.envfile import load_env_file, write_env_file

REPO = Path(__file__).resolve().parent.parent

TRICKY = {
    "PLAIN": "value",
    "QUOTES": 'it\'s "quoted"',
    "BACKSLASHES": "C:\\path\\'x\\\\",
    "DOLLARS": "pa$$word ${HOME} $HOME",
    "HASH": "before # after",
    "NEWLINE": "line one\nline two",
    "SPACES": "  padded  ",
    "EMPTY": "",
    "URL": "postgres://virgo:p%40ss@127.0.0.1:5432/virgo?sslmode=require",
}


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TRICKY:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("clean_environ")
def test_what_is_written_is_read_back_exactly(tmp_path: Path) -> None:
    """VX-SEC-6: a secret is taken as written: quotes, backslashes, `$`, `#`, newlines survive,
    and nothing is interpolated."""
    path = write_env_file(tmp_path / "run" / "server.env", TRICKY)
    assert sorted(load_env_file(path)) == sorted(TRICKY)
    assert {name: os.environ[name] for name in TRICKY} == TRICKY


def test_the_file_and_its_directory_are_owner_private(tmp_path: Path) -> None:
    """VX-SEC-6: 0600 in a 0700 directory, whatever the umask; no temporary file is left."""
    old = os.umask(0)
    try:
        path = write_env_file(tmp_path / "run" / "server.env", {"SECRET_KEY": "s"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [entry.name for entry in path.parent.iterdir()] == ["server.env"]


def test_real_environment_variables_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """VX-SEC-6: the file fills in what the environment lacks and overrides nothing."""
    monkeypatch.setenv("PLAIN", "from the environment")
    monkeypatch.delenv("URL", raising=False)
    path = write_env_file(tmp_path / "server.env", {"PLAIN": "from the file", "URL": "u"})
    assert load_env_file(path) == ["URL"]
    assert (os.environ["PLAIN"], os.environ["URL"]) == ("from the environment", "u")


def test_a_file_others_may_read_is_refused(tmp_path: Path) -> None:
    """VX-SEC-6: a group- or world-readable copy of the secrets is the leak; the error names
    the variable and the fix."""
    path = write_env_file(tmp_path / "server.env", {"NEVER_LOADED": "x"})
    path.chmod(0o640)
    with pytest.raises(
        ImproperlyConfigured, match=r"VIRGO_ENV_FILE: .* not owner-private.*chmod 600"
    ):
        load_env_file(path)
    assert "NEVER_LOADED" not in os.environ


def test_a_symlink_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    """VX-SEC-6: a named file must be there, and be the file itself, not a link to one."""
    target = write_env_file(tmp_path / "server.env", {"NEVER_LOADED": "x"})
    link = tmp_path / "link.env"
    link.symlink_to(target)
    with pytest.raises(ImproperlyConfigured, match="cannot be read as a plain file"):
        load_env_file(link)
    with pytest.raises(ImproperlyConfigured, match=r"VIRGO_ENV_FILE: .*gone\.env does not exist"):
        load_env_file(tmp_path / "gone.env")
    assert load_env_file(tmp_path / "gone.env", required=False) == []
    assert load_env_file(None) == [] and load_env_file("") == []
    assert "NEVER_LOADED" not in os.environ


def settings_seen(home: Path, **environ: str) -> dict[str, object]:
    """What virgo.settings make of a new shell's environment with VIRGO_HOME at `home`."""
    script = (
        "import json; from django.conf import settings as s; "
        "print(json.dumps([s.SECRET_KEY, s.EMBEDDED, s.VIRGO_PUBLIC_BASE_URL]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "VIRGO_HOME": str(home),
            "DJANGO_SETTINGS_MODULE": "virgo.settings",
            **environ,
        },
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    key, embedded, base = json.loads(done.stdout)
    return {"SECRET_KEY": key, "EMBEDDED": embedded, "VIRGO_PUBLIC_BASE_URL": base}


def embedded(home: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """`make run`'s first step."""
    return subprocess.run(
        [sys.executable, "-m", "virgo.envfile", "embedded"],
        env={"PATH": os.environ["PATH"], "VIRGO_HOME": str(home), **environ},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_make_run_writes_the_embedded_settings_once_and_settings_read_them(
    tmp_path: Path,
) -> None:
    """VX-OPS-1: `python -m virgo.envfile embedded` (make run) writes VIRGO_HOME/virgo.env,
    0600, with VIRGO_EMBEDDED=1 and a generated SECRET_KEY that a second run keeps; a process
    started with nothing exported reads it."""
    home = tmp_path / "var"
    embedded(home, VIRGO_PUBLIC_BASE_URL="http://127.0.0.1:9000")
    path = home / "virgo.env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = dotenv_values(path)
    assert first["VIRGO_EMBEDDED"] == "1"
    assert len(first["SECRET_KEY"]) >= 50
    assert settings_seen(home) == {
        "SECRET_KEY": first["SECRET_KEY"],
        "EMBEDDED": True,
        "VIRGO_PUBLIC_BASE_URL": "http://127.0.0.1:9000",
    }

    with path.open("a") as handle:
        handle.write("LOG_LEVEL=WARNING\n")
    embedded(home, VIRGO_PUBLIC_BASE_URL="http://127.0.0.1:8000")
    second = dotenv_values(path)
    assert second["SECRET_KEY"] == first["SECRET_KEY"]
    assert second["LOG_LEVEL"] == "WARNING"
    assert second["VIRGO_PUBLIC_BASE_URL"] == "http://127.0.0.1:8000"


def test_the_environment_wins_over_the_installations_file(tmp_path: Path) -> None:
    """VX-OPS-1: a variable set in the environment is used whatever the file says; the file
    fills in the others."""
    embedded(tmp_path)
    seen = settings_seen(tmp_path, SECRET_KEY="from-the-environment")
    assert (seen["SECRET_KEY"], seen["EMBEDDED"]) == ("from-the-environment", True)
    seen = settings_seen(tmp_path, VIRGO_EMBEDDED="0")
    assert seen["SECRET_KEY"] == dotenv_values(tmp_path / "virgo.env")["SECRET_KEY"]
    assert seen["EMBEDDED"] is False
