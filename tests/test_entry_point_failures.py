"""VX-OPS-7: what keeps a `virgo` command from working is one line naming the problem and its
fix, status 2, never a traceback: a database it cannot reach, one not migrated, an agent command
that is not installed; VX-OPS-8's refusals of a name reach the operator the same way.

Each runs `python -m virgo.cli` as a real process in an environment of its own, from a directory
that is not the checkout, with this checkout first on PYTHONPATH (the installed `virgo` script
would run whichever checkout was installed).
"""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import REPO, free_port

TIMEOUT = 120


# Django's own commands are manage.py's, not `virgo`'s (VX-OPS-10): they fail the same way.
DJANGO_COMMANDS = frozenset({"migrate", "shell"})


def program_of(command: list[str]) -> str:
    return "manage.py" if command[0] in DJANGO_COMMANDS else "virgo"


def virgo(database_url: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PYTHONPATH": str(REPO),
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(home / "virgo-home"),
        "SECRET_KEY": "entry-points-" + secrets.token_hex(16),
        "DATABASE_URL": database_url,
        "LOG_LEVEL": "WARNING",
    }
    program = [str(REPO / "manage.py")] if args[0] in DJANGO_COMMANDS else ["-m", "virgo.cli"]
    return subprocess.run(
        [sys.executable, *program, *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr of a command that failed with status 2 and no traceback."""
    said = f"status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 2, said
    assert "Traceback" not in done.stdout + done.stderr, said
    [line] = done.stderr.splitlines()
    return line


# Commands that read the database at once, each a different way in: Django's own, the checks,
# a list, a lookup by name, an owner's write and the launcher.
COMMANDS = [
    ["check"],
    ["migrate", "--noinput"],
    ["agent", "list", "--json"],
    ["persona", "list"],
    ["stamp", "show", "Secretary"],
    ["persona", "revoke", "Secretary", "--by", "root", "--reason-code", "compromised",
     "--reason", "x"],
    ["launch", "--persona", "Secretary", "--", "true"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_database_nobody_listens_on_is_one_line(command: list[str], tmp_path: Path) -> None:
    """VX-OPS-7: PostgreSQL down (a loopback port nobody listens on): one line naming where it
    looked and how it failed, and the fix; `virgo check` fails with it rather than passing."""
    port = free_port()
    done = virgo(f"postgres://virgo:secret-pw@127.0.0.1:{port}/virgo", tmp_path, *command)
    line = one_line(done)
    where = f"127.0.0.1:{port}/virgo"
    assert line.startswith(f"{program_of(command)}: cannot reach the database {where} (")
    assert "Connection refused" in line
    assert line.endswith("): start it, or set DATABASE_URL to a database that answers")
    assert "secret-pw" not in line


def test_a_database_file_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    """VX-OPS-7: SQLite in a directory that does not exist: one line, its own fix."""
    path = tmp_path / "gone" / "virgo.sqlite3"
    for command in (["check"], ["persona", "list"]):
        assert one_line(virgo(f"sqlite:///{path}", tmp_path, *command)) == (
            f"virgo: cannot reach the database {path} (unable to open database file): make its "
            "directory and let this user write there, or set DATABASE_URL to another file"
        )


@pytest.mark.parametrize("command", COMMANDS[2:], ids=" ".join)
def test_a_database_never_migrated_is_one_line(command: list[str], tmp_path: Path) -> None:
    """VX-OPS-7: an empty database (a new SQLite file): one line saying to migrate."""
    path = tmp_path / "empty.sqlite3"
    path.touch()
    line = one_line(virgo(f"sqlite:///{path}", tmp_path, *command))
    assert line.startswith(f"virgo: the database {path} is not migrated (")
    assert line.endswith(" migrations not applied): run `manage.py migrate`")


def test_a_missing_agent_command_is_one_line(tmp_path: Path) -> None:
    """VX-OPS-7: `virgo launch -- claude` without claude installed: one line, found before the
    database is asked (here it could not be) or anything is written for the agent."""
    done = virgo(
        f"postgres://virgo@127.0.0.1:{free_port()}/virgo",
        tmp_path,
        "launch", "--persona", "Secretary", "--", "virgo-test-no-such-agent", "--flag",
    )  # fmt: skip
    assert one_line(done) == (
        "CommandError: agent command 'virgo-test-no-such-agent' not found on PATH: install it, "
        "or give its full path after --"
    )


def test_launch_with_nothing_after_the_separator_is_a_usage_error(tmp_path: Path) -> None:
    """VX-OPS-7 (issue 43): `virgo launch --persona X --` with no agent command exits 2 with the
    line that says what to give, as without the `--`."""
    url = f"postgres://virgo@127.0.0.1:{free_port()}/virgo"
    expected = "CommandError: give the agent command after --, e.g. launch --persona X -- claude"
    assert one_line(virgo(url, tmp_path, "launch", "--persona", "Secretary", "--")) == expected
    assert one_line(virgo(url, tmp_path, "launch", "--persona", "Secretary")) == expected


def test_names_on_a_migrated_installation(tmp_path: Path) -> None:
    """VX-OPS-8, VX-OPS-7: on a real installation an empty list is one line; two personas of one
    name make that name one line listing both ids, status 2; each id names its persona. A
    database error of another cause (a bug) keeps its traceback: the diagnosis hides nothing."""
    url = f"sqlite:///{tmp_path / 'virgo.sqlite3'}"
    assert virgo(url, tmp_path, "migrate", "--noinput", "-v", "0").returncode == 0
    listed = virgo(url, tmp_path, "persona", "list")
    assert (listed.returncode, listed.stdout) == (0, "No personas.\n")
    created = virgo(url, tmp_path, "shell", "-c", MAKE_TWINS)
    assert created.returncode == 0, created.stderr
    ids = [line.split()[1] for line in created.stdout.splitlines() if line.startswith("made ")]
    assert one_line(virgo(url, tmp_path, "stamp", "show", "Twin")) == (
        f"CommandError: persona 'Twin' is ambiguous: ids {ids[0]}, {ids[1]} answer to it; "
        "give one id"
    )
    for persona_id in ids:
        shown = virgo(url, tmp_path, "stamp", "show", persona_id)
        assert "persona 'Twin' (" in shown.stdout, shown.stderr

    bug = virgo(url, tmp_path, "shell", "-c", "from django.db import connection\n"
                "connection.cursor().execute('SELECT * FROM no_such_table')")  # fmt: skip
    assert bug.returncode == 1
    assert "Traceback" in bug.stderr and "no such table: no_such_table" in bug.stderr


# Two personas named Twin on one owner's agent, made through the services; prints their ids.
MAKE_TWINS = """
from django.contrib.auth import get_user_model
from personas import services
from personas.models import PersonaClass, RegisteredAddress
from stamps.profiles import required_tools
owner = get_user_model().objects.create_user("owner")
verbs = list(required_tools(PersonaClass.SECRETARY))
agent = services.agent_create(owner=owner, name="main", granted_verbs=verbs, granted_queues=[])
for path in ("work/one", "work/two"):
    address = RegisteredAddress.objects.create(path=path, registered_by=owner)
    persona = services.persona_create(
        agent=agent, actor=owner, name="Twin", system_prompt="p", verb_subset=verbs,
        persona_class=PersonaClass.SECRETARY, address=address, queues=[],
    )
    print("made", persona.pk)
"""
