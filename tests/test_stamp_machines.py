"""VX-SCALE-2: stamp files are per machine, materialised where a persona runs.

Two machines share one database, each with its own VIRGO_HOME. Machine B never ran a persona, so
it has no stamp file: `virgo check` and the sweep there pass quietly (no warning, no audit
event, nothing written), the runtime loading a persona there writes its file from the immutable
stored row and the file verifies, and a tampered file on either machine is still caught.
"""

import logging
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from pytest_django.fixtures import Settings

from personas.models import AuditEvent, Generation, Persona
from runtime.stamp import StampUnavailable, load_active_stamp
from stamps.checks import active_stamp_messages
from stamps.integrity import file_is_intact, stamp_file_messages
from stamps.models import CapabilityStamp
from stamps.quarantine import sweep
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet() -> list[Persona]:
    """Three standing personas, their files written on machine A (the test's VIRGO_HOME)."""
    agent = make_agent(make_owner("olivia"))
    return [make_persona(agent, name=name) for name in ("One", "Two", "Three")]


def files_under(home: Path) -> list[Path]:
    return sorted(home.rglob("CAPABILITY-STAMP.json*"))


def current(persona: Persona) -> Generation:
    return Generation.objects.select_related("persona", "stamp").get(
        persona=persona, number=persona.generation
    )


def alter(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"access":"allow"', b'"access":"confirm"', 1))


def standing(persona: Persona) -> bool | None:
    persona.refresh_from_db()
    return persona.standing


def test_a_machine_that_never_ran_a_persona_checks_quietly(
    fleet: list[Persona],
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-SCALE-2: `virgo check` and the sweep on machine B (own VIRGO_HOME, same database, no
    stamp file) pass with no warning, no audit event and no file written."""
    machine_a = Path(settings.VIRGO_HOME)
    assert len(files_under(machine_a)) == 3
    settings.VIRGO_HOME = tmp_path / "machine-b"
    settings.VIRGO_HOME.mkdir(mode=0o700)
    events = AuditEvent.objects.count()
    with caplog.at_level(logging.DEBUG):
        assert active_stamp_messages() == []
        call_command("check")
        report = sweep()
    assert (report.verified, report.not_here, report.repaired) == (3, 3, [])
    assert report.quarantined == report.unreadable == []
    assert files_under(settings.VIRGO_HOME) == []
    assert AuditEvent.objects.count() == events
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(standing(persona) for persona in fleet)


def test_the_runtime_materialises_the_file_from_the_row_and_it_verifies(
    fleet: list[Persona], settings: Settings, tmp_path: Path
) -> None:
    """VX-SCALE-2: loading a persona on machine B writes its file there, byte for byte the
    stored stamp, owner-private; it verifies in full, and no repair is recorded."""
    settings.VIRGO_HOME = tmp_path / "machine-b"
    settings.VIRGO_HOME.mkdir(mode=0o700)
    persona = fleet[0]
    events = AuditEvent.objects.count()
    active = load_active_stamp(persona)
    path = stamp_path(persona.uuid, persona.generation)
    assert path.is_relative_to(settings.VIRGO_HOME)
    stored = CapabilityStamp.objects.get(persona_uuid=persona.uuid)
    assert path.read_bytes() == stored.data == active.data
    assert path.stat().st_mode & 0o777 == 0o600
    generation = current(persona)
    assert file_is_intact(generation)
    assert stamp_file_messages(generation) == []
    assert files_under(settings.VIRGO_HOME) == [path]
    assert AuditEvent.objects.count() == events
    assert active_stamp_messages() == []
    assert load_active_stamp(persona).data == stored.data


@pytest.mark.parametrize("machine", ["A (where it was built)", "B (where it was materialised)"])
def test_a_tampered_file_is_caught_on_either_machine(
    machine: str, fleet: list[Persona], settings: Settings, tmp_path: Path
) -> None:
    """VX-SCALE-2: a file that exists and differs from the row is tampering wherever it is: the
    check there fails naming it and quarantines that persona alone; the runtime refuses it."""
    tampered, other = fleet[0], fleet[1]
    if machine.startswith("B"):
        settings.VIRGO_HOME = tmp_path / "machine-b"
        settings.VIRGO_HOME.mkdir(mode=0o700)
        load_active_stamp(tampered)
    path = stamp_path(tampered.uuid, tampered.generation)
    alter(path)
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert f"stamp file {path} was altered" in str(failed.value)
    assert standing(tampered) is False and standing(other) is True
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED)
    assert event.data["path"] == str(path)
    with pytest.raises(StampUnavailable, match="not standing"):
        load_active_stamp(tampered)
    assert load_active_stamp(other).mcp_tools


def test_a_tampered_file_on_machine_b_is_caught_by_the_runtime_and_the_sweep(
    fleet: list[Persona], settings: Settings, tmp_path: Path
) -> None:
    """VX-SCALE-2: on machine B the runtime's own load refuses an altered file and quarantines;
    the sweep there quarantines another altered one and leaves the absent one alone."""
    settings.VIRGO_HOME = tmp_path / "machine-b"
    settings.VIRGO_HOME.mkdir(mode=0o700)
    first, second, absent = fleet
    for persona in (first, second):
        load_active_stamp(persona)
        alter(stamp_path(persona.uuid, persona.generation))
    with pytest.raises(StampUnavailable, match="was altered"):
        load_active_stamp(first)
    report = sweep()
    assert report.quarantined == [str(second.uuid)]
    assert report.not_here == 1
    assert standing(first) is False and standing(second) is False and standing(absent) is True
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED).count() == 2
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()
