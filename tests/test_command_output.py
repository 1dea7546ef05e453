"""Output for people and for scripts: `--json` puts one JSON document on stdout and every other
line on stderr; long commands show progress on a terminal and nothing when piped."""

import json
import os
import pty
import secrets
import subprocess
import sys
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
import rfc8785
from django.core.management import CommandError, call_command

from personas import services
from personas.models import Persona
from stamps.models import CapabilityStamp
from tests.factories import make_agent, make_owner, make_persona

VIRGO = Path(sys.executable).with_name("virgo")
REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def owed(persona: Persona) -> Persona:
    """A change whose on-commit task never ran (it is not run in these tests): work is owed."""
    services.persona_update(
        persona=persona, actor=persona.agent.owner, description="Reviews, more carefully."
    )
    persona.refresh_from_db()
    return persona


@pytest.mark.django_db
def test_stamp_show_json_prints_only_the_stamp() -> None:
    """VX-OPS-1: `stamp show --json` writes the stored stamp document, alone, on stdout (so
    `| jq` reads it); the header lines go to stderr."""
    persona = make_persona(make_agent(make_owner()), name="Shown")
    stored = CapabilityStamp.objects.get()
    out, err = run("stamp", "show", str(persona.uuid), "--json")
    assert rfc8785.dumps(json.loads(out)) == stored.data
    assert f"persona 'Shown' ({persona.uuid}) generation 1" in err
    assert f"stamp sha256 {stored.stamp_hash}" in err
    assert "\x1b[" not in err


@pytest.mark.django_db
def test_stamp_show_json_of_an_owed_stamp_prints_nothing_on_stdout() -> None:
    persona = owed(make_persona(make_agent(make_owner()), name="Owed"))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="its stamp is owed"):
        call_command("stamp", "show", str(persona.uuid), "--json", stdout=out, stderr=err)
    assert out.getvalue() == ""
    assert f"persona 'Owed' ({persona.uuid}) generation 2" in err.getvalue()


@pytest.mark.django_db
def test_check_json_is_one_document_and_fails_as_check_does() -> None:
    """VX-OPS-1: `check --json` prints a JSON document of every issue with its id, level and
    message; with an error it still exits non-zero, the summary on stderr."""
    persona = make_persona(make_agent(make_owner()), name="Checked")
    out, err = run("check", "--json")
    assert json.loads(out) == {"ok": True, "issues": [], "silenced": 0}
    assert "System check identified no issues (0 silenced)." in err

    path = Path(CapabilityStamp.objects.get().path)
    path.write_bytes(path.read_bytes().replace(b'"Checked"', b'"Altered"'))
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="at or above the fail level"):
        call_command("check", "--json", stdout=out, stderr=err)
    document = json.loads(out.getvalue())
    assert document["ok"] is False
    [issue] = [issue for issue in document["issues"] if issue["id"] == "virgo.E002"]
    assert issue["level"] == "ERROR"
    assert f"({persona.uuid})" in issue["message"] and "was altered" in issue["message"]


@pytest.mark.django_db
def test_reconcile_json_reports_what_was_owed_and_done() -> None:
    """VX-OPS-1: `reconcile --json` (and its --dry-run) print one JSON document."""
    persona = owed(make_persona(make_agent(make_owner()), name="Behind"))
    out, _ = run("reconcile", "--dry-run", "--json")
    assert json.loads(out) == {
        "owed": 1,
        "personas": [{"uuid": str(persona.uuid), "name": "Behind", "generation": 2}],
    }
    out, _ = run("reconcile", "--json")
    assert json.loads(out) == {"owed": 1, "done": 1, "failed": []}
    out, _ = run("reconcile", "--json")
    assert json.loads(out) == {"owed": 0, "done": 0, "failed": []}


# Progress: the real `virgo` command with its stderr on a terminal (a pseudo-terminal), or piped.


@dataclass
class Installation:
    home: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(VIRGO), *args],
            env=self.env,
            cwd=self.home.parent,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert done.returncode == 0, done.stderr
        return done

    def django(self, *args: str) -> subprocess.CompletedProcess[str]:
        """One of Django's own commands, which are manage.py's (VX-OPS-10)."""
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), *args],
            env=self.env,
            cwd=self.home.parent,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert done.returncode == 0, done.stderr
        return done

    def on_a_terminal(self, *args: str) -> tuple[str, str]:
        """stdout piped, stderr a terminal: what each received."""
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            [str(VIRGO), *args],
            env={**self.env, "TERM": "xterm-256color", "COLUMNS": "100"},
            cwd=self.home.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            shown += chunk
        os.close(controller)
        assert process.stdout is not None
        out = process.stdout.read().decode()
        assert process.wait(timeout=TIMEOUT) == 0, shown
        return out, shown.decode(errors="replace")


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Installation:
    home = tmp_path_factory.mktemp("output") / "home"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent),
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(home),
        "SECRET_KEY": "output-test-" + secrets.token_hex(16),
        "LOG_LEVEL": "WARNING",
    }
    installed = Installation(home, env)
    installed.django("migrate", "--noinput", "-v", "0")
    installed.django("createsuperuser", "--noinput", "--username", "root", "--email", "r@x.example")
    installed.run(
        "persona", "add", "--owner", "root", "--agent", "main", "--create-agent",
        "--queues", "inbox", "--prompt", "You answer for me.",
    )  # fmt: skip
    return installed


@pytest.mark.parametrize(
    ("command", "description"),
    [
        (["check"], "active stamps verified"),
        (["reconcile"], "owed personas reconciled"),
        (["stamp", "build", "--all"], "stamps built"),
    ],
)
def test_long_commands_show_progress_on_a_terminal_and_none_when_piped(
    installation: Installation, command: list[str], description: str
) -> None:
    """VX-OPS-1: the progress bar is drawn on stderr when it is a terminal, never on stdout,
    and not at all when stderr is piped."""
    out, shown = installation.on_a_terminal(*command)
    assert description in shown
    assert description not in out
    piped = installation.run(*command)
    assert description not in piped.stdout + piped.stderr


def test_check_json_on_a_terminal_keeps_stdout_one_document(installation: Installation) -> None:
    """VX-OPS-1: `virgo check --json | jq`, run at a terminal: stdout is the document alone."""
    out, shown = installation.on_a_terminal("check", "--json")
    assert json.loads(out)["ok"] is True
    assert "active stamps verified" in shown
    assert "System check identified" in shown.split("active stamps verified")[-1]
