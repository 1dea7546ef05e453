"""`virgo check` in worker processes says exactly what it says in one, and writes what it writes.

On PostgreSQL, with the rows committed (each worker reads and writes through a connection of its
own): a fleet with an altered file, a missing one, one others may read, one already quarantined
and one owed, verified once in this process and once in two workers, batches of two so that
every worker has several. The findings' writes (the quarantine, the repair, their audit events)
are made either way; between the runs they are undone, so both start from the same state.
"""

import os
import time
from pathlib import Path

import pytest
from django.core.checks import CheckMessage

from personas.models import AuditEvent, Generation, Persona
from stamps import checks
from stamps.checks import active_stamp_messages
from stamps.models import CapabilityStamp
from stamps.quarantine import FoundBy, quarantine
from tests.factories import make_agent, make_owner, make_persona
from tests.live import DEADLINE_SECONDS

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]


def stamp_file(persona: Persona) -> Path:
    return CapabilityStamp.objects.get(persona_uuid=persona.uuid).path


def current(persona: Persona) -> Generation:
    return Generation.objects.get(persona=persona, number=1)


def said(messages: list[CheckMessage]) -> list[tuple[object, ...]]:
    return [(m.level, m.id, m.msg, m.hint, str(m.obj)) for m in messages]


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> dict[str, Persona]:
    monkeypatch.setattr(checks, "_BATCH", 2)
    agent = make_agent(make_owner())
    personas = {
        name: make_persona(agent, name=name)
        for name in ("intact", "altered", "missing", "readable", "quarantined", "owed", "last")
    }
    path = stamp_file(personas["altered"])
    path.write_bytes(path.read_bytes().replace(b'"access":"allow"', b'"access":"confirm"', 1))
    stamp_file(personas["missing"]).unlink()
    stamp_file(personas["readable"]).chmod(0o644)
    quarantine(current(personas["quarantined"]), ["the file was altered"], found_by=FoundBy.SWEEP)
    Generation.objects.filter(pk=current(personas["owed"]).pk).update(standing=None)
    return personas


def undo_findings(fleet: dict[str, Persona]) -> None:
    """Put back what a run changed: the altered persona stands again (its file still altered),
    and the repaired file is readable by others again. Its audit events stay (append-only)."""
    altered = fleet["altered"]
    Generation.objects.filter(pk=current(altered).pk).update(standing=True, not_standing_reasons=[])
    Persona.objects.filter(pk=altered.pk).update(standing=True)
    stamp_file(fleet["readable"]).chmod(0o644)


def findings_recorded(since: int) -> list[tuple[str, str]]:
    events = AuditEvent.objects.filter(pk__gt=since).order_by("persona__name")
    return [(str(event.kind), event.persona.name) for event in events]


def last_event() -> int:
    latest = AuditEvent.objects.order_by("-pk").first()
    return latest.pk if latest else 0


def test_workers_say_and_write_what_one_process_does(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4, VX-SCALE-2: verified in two processes or in one, the same messages in the same
    order; the altered persona alone is quarantined and the readable file repaired, each with
    one audit event, and the file missing on this machine is no finding either way."""
    before = last_event()
    serial = active_stamp_messages(processes=1)
    serial_events = findings_recorded(before)
    assert current(fleet["altered"]).standing is False
    assert stamp_file(fleet["readable"]).stat().st_mode & 0o777 == 0o600
    undo_findings(fleet)
    between = last_event()

    parallel = active_stamp_messages(processes=2)

    assert said(parallel) == said(serial)
    assert [m.id for m in parallel] == [
        "virgo.W001",
        "virgo.E002",
        "virgo.W004",
        "virgo.E012",
    ]
    assert serial_events == [
        (AuditEvent.Kind.STAMP_QUARANTINED, "altered"),
        (AuditEvent.Kind.STAMP_REPAIRED, "readable"),
    ]
    assert findings_recorded(between) == serial_events
    assert current(fleet["altered"]).standing is False
    assert Persona.objects.get(pk=fleet["intact"].pk).standing is True
    assert not stamp_file(fleet["missing"]).exists()


def test_it_runs_in_as_many_processes_as_asked(
    fleet: dict[str, Persona], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue #27 (no checklist id: how fast `virgo check` runs has none): the batches are
    verified in worker processes, as many as asked and none of them this one. Each batch notes
    its process and waits to see another's note, so a single worker taking every batch would
    fail this rather than pass it by luck."""
    notes = tmp_path / "pids"
    notes.touch()
    verify_range = checks.verify_range

    def noted(bounds: tuple[int, int], **kwargs: checks.Verdicts) -> checks.Verified:
        with notes.open("a") as file:
            file.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + DEADLINE_SECONDS
        while len(set(notes.read_text().split())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return verify_range(bounds, **kwargs)

    # Inherited by the forked workers, which call verify_range by its module's name.
    monkeypatch.setattr(checks, "verify_range", noted)
    active_stamp_messages(processes=2)
    pids = set(notes.read_text().split())
    assert len(pids) == 2
    assert str(os.getpid()) not in pids
