"""Start-up does not read every stamp (VX-OPS-5): what runs at start takes constant time.

The system checks that migrate, runserver, launch and mcp serve run, virgo-web's check before it
binds and every worker's before it takes a task: the schema, the handler registry, and how many
stamps are owed said once. Proved without a timed assertion: the queries they make do not depend
on the number of personas, and a real process starting on a fleet opens no stamp file at all.
"""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.test.utils import CaptureQueriesContext

from personas.models import Generation, Persona
from stamps import checks
from stamps.checks import check_worker_start, start_checks
from stamps.quarantine import sweep
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona
from tests.live import REPO

pytestmark = pytest.mark.django_db


def start_up() -> list[str]:
    """Everything start-up checks, in this process: the ids of what it reported."""
    messages = run_checks()
    start_checks()
    check_worker_start()
    return [message.id or "" for message in messages]


def test_start_up_makes_the_same_queries_for_two_personas_or_twenty() -> None:
    """VX-OPS-5: the system checks and the web and worker start checks cost a fixed number of
    queries, whatever the fleet (two, then twenty personas, one of each owed)."""
    agent = make_agent(make_owner())
    start_up()  # once before counting: the database backend asks about its features once
    counts = []
    for size in (2, 20):
        while Persona.objects.count() < size:
            make_persona(agent)
        Persona.objects.filter(pk=Persona.objects.order_by("pk").last().pk).update(standing=None)
        with CaptureQueriesContext(connection) as captured:
            start_up()
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]


def test_start_up_says_how_many_stamps_are_owed_and_quarantined_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-OPS-5, VX-OPS-4: "N stamps owed" and "N personas quarantined" once each, not one line
    per persona, naming none of them."""
    agent = make_agent(make_owner())
    owed = [make_persona(agent) for _ in range(5)]
    broken = [make_persona(agent) for _ in range(2)]
    Persona.objects.filter(pk__in=[persona.pk for persona in owed]).update(standing=None)
    for persona in broken:
        stamp_path(persona.uuid, 1).write_bytes(b"{}")
    sweep()
    messages = run_checks()
    [owed_line] = [m for m in messages if m.id == "virgo.W001"]
    assert (owed_line.msg, owed_line.obj) == ("5 stamps owed (builds pending)", None)
    [quarantined] = [m for m in messages if m.id == "virgo.W005"]
    assert quarantined.msg.startswith("2 personas quarantined for a broken stamp file")
    assert not [m for m in messages if m.obj is not None]
    with caplog.at_level(logging.WARNING, logger="stamps.checks"):
        start_checks()
    logged = [r.message for r in caplog.records if r.name == "stamps.checks"]
    assert logged[0] == (
        "virgo.W001: 5 stamps owed (builds pending). A Celery worker builds them, or "
        "`virgo reconcile`."
    )
    assert logged[1].startswith("virgo.W005: 2 personas quarantined")
    assert len(logged) == 2


def test_start_up_counts_owed_and_quarantined_no_further_than_its_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-OPS-5: how many stamps are owed and personas quarantined is counted no further than
    START_COUNT_CAP ("over N"), so the count does not grow with a backlog of 100k; `virgo
    check`, which reads every stamp anyway, says exactly how many are owed."""
    monkeypatch.setattr(checks, "START_COUNT_CAP", 3)
    agent = make_agent(make_owner())
    owed = [make_persona(agent) for _ in range(5)]
    broken = [make_persona(agent) for _ in range(4)]
    Persona.objects.filter(pk__in=[persona.pk for persona in owed]).update(standing=None)
    Generation.objects.filter(persona__in=owed).update(standing=None)
    for persona in broken:
        stamp_path(persona.uuid, 1).write_bytes(b"{}")
    sweep()
    with CaptureQueriesContext(connection) as captured:
        messages = checks.backlog_messages()
    assert [message.msg.split(" (")[0] for message in messages] == [
        "over 3 stamps owed",
        "over 3 personas quarantined for a broken stamp file",
    ]
    counts = [query["sql"] for query in captured.captured_queries if "COUNT" in query["sql"]]
    assert len(counts) == 2 and all("LIMIT 4" in sql for sql in counts), counts
    with checks.verifying_every_stamp():
        every = run_checks(tags=[checks.TAG])
    [exact] = [message for message in every if message.id == "virgo.W001"]
    assert exact.msg == "5 stamps owed (builds pending)"


# The script run as a real process: a fleet made first, then an audit hook records every stamp
# file opened by what each start-up runs, and last by `virgo check`, which must open them all.
_START_ON_A_FLEET = """
import sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests.factories import make_agent, make_owner, make_persona
agent = make_agent(make_owner("fleet"))
for _ in range(int(sys.argv[1])):
    make_persona(agent)
opened = []
def hook(event, args):
    if event == "open" and "CAPABILITY-STAMP.json" in str(args[0]):
        opened.append(str(args[0]))
sys.addaudithook(hook)
call_command("migrate", verbosity=0)
from django.core.checks import run_checks
run_checks()
from virgo.web import run_start_checks
run_start_checks()
from stamps.checks import check_worker_start
check_worker_start()
print("START", len(opened))
call_command("check", verbosity=0)
print("CHECK", len(set(opened)))
"""


@pytest.mark.live
def test_a_start_on_many_personas_opens_no_stamp_file(tmp_path: Path) -> None:
    """VX-OPS-5: migrate (and its system checks), virgo-web's pre-bind check and a worker's
    start check, in a real process on 30 personas, open no stamp file; `virgo check` after them
    opens each of the 30."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("CELERY_")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.test_settings",
        VIRGO_HOME=str(tmp_path / "home"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'virgo.sqlite3'}",
    )
    done = subprocess.run(
        [sys.executable, "-c", _START_ON_A_FLEET, "30"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "START 0" in lines, done.stdout
    assert "CHECK 30" in lines, done.stdout
