"""One broken stamp file is that persona's problem (VX-OPS-4): repaired, or quarantined alone.

The sweep, `virgo check` and the runtime's load each find a broken file; one that is not on this
machine is no finding (VX-SCALE-2: the runtime materialises it from the stored stamp where the
persona runs), any other fault takes exactly that persona out of service (not standing,
card withdrawn, out of the directory, runtime refusing) with an ERROR line, an audit event and
the admin saying which file and why, until `virgo stamp restore` or a new generation.
"""

import itertools
import json
import logging
import re
import resource
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.test import Client

from cards import fastpath
from personas import audit
from personas.models import AuditEvent, Generation, Persona
from runtime.stamp import StampUnavailable, load_active_stamp
from stamps.integrity import stamp_file_messages
from stamps.models import CapabilityStamp
from stamps.quarantine import (
    FoundBy,
    quarantine,
    quarantine_message,
    quarantined_personas,
    restore,
    settle,
    sweep,
)
from stamps.storage import stamp_path
from stamps.tasks import verify_stamp_files
from tests.factories import make_agent, make_owner, make_persona, update_persona
from tests.grant_support import broken_generation
from tests.owner_clients import token_client
from tests.runtime_support import standing_persona
from tests.stored_stamps import standing_without_stored_stamp, store_as_stamp

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet() -> dict[str, Persona]:
    """Four discoverable personas of one owner, each standing with its card published."""
    agent = make_agent(make_owner("olivia"))
    return {
        name: make_persona(agent, name=name, discoverable=True)
        for name in ("Altered", "Lost", "Kept", "Other")
    }


def file_of(persona: Persona) -> Path:
    return stamp_path(persona.uuid, persona.generation)


def stored_bytes(persona: Persona) -> bytes:
    return CapabilityStamp.objects.get(
        persona_uuid=persona.uuid, generation_number=persona.generation
    ).data


def alter(persona: Persona) -> bytes:
    """Change one letter of the persona's stamp file (still valid JSON, another hash)."""
    path = file_of(persona)
    data = path.read_bytes().replace(b'"access":"allow"', b'"access":"confirm"', 1)
    path.write_bytes(data)
    return data


def card_status(persona: Persona) -> int:
    # A peer address of its own per read: the card limit counts per address in the Redis every
    # test on this worker shares, and these tests are about what a card says, not the limit.
    peer = f"198.51.100.{next(_peers)}"
    return Client(REMOTE_ADDR=peer).get(persona.card_path).status_code


_peers = itertools.cycle(range(1, 255))


def listed(reader: Any) -> set[str]:
    return {
        entry["name"] for entry in token_client(reader).get("/api/directory/").json()["results"]
    }


def standing(persona: Persona) -> bool | None:
    persona.refresh_from_db()
    return persona.standing


def test_the_sweep_quarantines_the_altered_persona_alone_and_leaves_the_absent_file_alone(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: among several personas, an altered file quarantines its persona (not standing,
    no card, out of the directory, its runtime refusing with the reason, an ERROR line, an audit
    event naming the file and why); every other persona keeps serving. VX-SCALE-2 (was: the lost
    file rewritten with a repair event): a file not on this machine is no finding, the sweep
    neither writes it nor warns nor records anything; the runtime materialises it when it loads."""
    altered, lost = fleet["Altered"], fleet["Lost"]
    reader = make_owner("reader")
    assert listed(reader) == set(fleet)
    alter(altered)
    file_of(lost).unlink()

    with caplog.at_level(logging.WARNING, logger="stamps.quarantine"):
        report = sweep()

    assert report.quarantined == [str(altered.uuid)]
    assert report.repaired == []
    assert report.not_here == 1
    assert report.verified == 4
    assert not file_of(lost).exists()
    path = file_of(altered)
    assert standing(altered) is False
    generation = Generation.objects.get(persona=altered, number=1)
    assert generation.not_standing_reasons[0] == "quarantined by the verification sweep"
    assert generation.not_standing_reasons[1].startswith(f"stamp file {path} was altered (sha256 ")
    assert card_status(altered) == 404
    assert listed(reader) == {"Lost", "Kept", "Other"}
    with pytest.raises(StampUnavailable, match=rf"not standing.*stamp file {path} was altered"):
        load_active_stamp(altered)
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert f"persona 'Altered' ({altered.uuid}) generation 1: stamp quarantined" in error.message
    assert f"virgo stamp restore {altered.uuid}" in error.message
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED)
    assert event.persona == altered
    assert event.data["path"] == str(path)
    assert event.data["found_by"] == "the verification sweep"
    assert any("was altered" in reason for reason in event.data["reasons"])

    assert "was missing" not in caplog.text and str(file_of(lost)) not in caplog.text
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()
    for name in ("Lost", "Kept", "Other"):
        assert standing(fleet[name]) is True
        assert card_status(fleet[name]) == 200
        assert load_active_stamp(fleet[name]).mcp_tools
    assert list(quarantined_personas()) == [altered]
    # The loads above materialised Lost's file from its row, and it verifies.
    assert file_of(lost).read_bytes() == stored_bytes(lost)
    assert file_of(lost).stat().st_mode & 0o777 == 0o600
    assert sweep().repaired == []


def test_a_quarantine_is_recorded_once(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: the sweep, the load and `virgo check` finding the same file again add no event
    and no ERROR line; the quarantine stays until it is lifted."""
    altered = fleet["Altered"]
    alter(altered)
    with caplog.at_level(logging.ERROR, logger="stamps.quarantine"):
        sweep()
        assert sweep().quarantined == []
        with pytest.raises(StampUnavailable):
            load_active_stamp(altered)
        with pytest.raises(SystemCheckError):
            call_command("check")
    assert len([r for r in caplog.records if "stamp quarantined" in r.message]) == 1
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED).count() == 1


def test_the_runtime_load_quarantines_at_once(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: the first load that meets an altered file refuses and quarantines: the card is
    withdrawn then, not at the next sweep, and the next load refuses saying why."""
    altered = fleet["Altered"]
    alter(altered)
    assert card_status(altered) == 200
    with pytest.raises(StampUnavailable, match="was altered"):
        load_active_stamp(altered)
    assert card_status(altered) == 404
    with pytest.raises(StampUnavailable, match="quarantined by the runtime's load; stamp file"):
        load_active_stamp(altered)
    with pytest.raises(CommandError, match=f"refusing to launch persona {altered.uuid}:.*altered"):
        call_command("launch", "--persona", str(altered.uuid), "--print-allowlist")
    with pytest.raises(CommandError, match=f"refusing to serve persona {altered.uuid}:.*altered"):
        call_command("mcp", "serve", "--persona", str(altered.uuid))
    out = StringIO()
    call_command("launch", "--persona", str(fleet["Kept"].uuid), "--print-allowlist", stdout=out)
    assert "mcp__virgo__workspace_list" in out.getvalue()


def test_a_file_absent_on_load_is_materialised_and_served(fleet: dict[str, Persona]) -> None:
    """VX-SCALE-2 (was VX-OPS-4's repair with an audit event): the launcher on a machine without
    the file writes it from the stored stamp and launches; no repair is recorded."""
    lost = fleet["Lost"]
    file_of(lost).unlink()
    out = StringIO()
    call_command("launch", "--persona", str(lost.uuid), "--print-allowlist", stdout=out)
    assert "mcp__virgo__workspace_list" in out.getvalue()
    assert file_of(lost).read_bytes() == stored_bytes(lost)
    assert standing(lost) is True
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()


def test_the_card_token_moves_so_every_web_process_reloads(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: quarantine replaces the persona's card token, which every web process reads
    before it answers from memory (cards.fastpath), and leaves other personas' tokens alone."""
    altered, kept = fleet["Altered"], fleet["Kept"]

    def token(persona: Persona) -> str | None:
        return fastpath._shared().count_and_token("192.0.2.1", str(persona.uuid), 60)[2]

    before = token(altered), token(kept)
    alter(altered)
    sweep()
    assert token(altered) != before[0]
    assert token(kept) == before[1]


def test_virgo_check_lists_every_problem_and_keeps_failing_while_quarantined(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: `virgo check`, for release pipelines, exits non-zero naming every broken file
    among the fleet and quarantines each; while a quarantine is open the next check fails too
    (virgo.E012), with the way out. VX-SCALE-2: the absent file is not named, nor rewritten."""
    altered, broken, lost = fleet["Altered"], fleet["Other"], fleet["Lost"]
    alter(altered)
    file_of(broken).write_bytes(b"{not json")
    file_of(lost).unlink()
    with pytest.raises(SystemCheckError) as first:
        call_command("check")
    text = str(first.value)
    assert f"persona 'Altered' ({altered.uuid}) generation 1: stamp file" in text
    assert f"persona 'Other' ({broken.uuid}) generation 1: stamp file" in text
    assert "is malformed: not JSON" in text
    assert str(file_of(lost)) not in text and "Lost" not in text
    assert not file_of(lost).exists()
    assert "Kept" not in text
    assert standing(altered) is False and standing(broken) is False
    assert standing(lost) is True and standing(fleet["Kept"]) is True
    with pytest.raises(SystemCheckError) as second:
        call_command("check")
    again = str(second.value)
    assert again.count("virgo.E012") == 2
    assert f"Restore its file from the stored stamp with `virgo stamp restore {altered.uuid}`" in (
        again
    )


def test_restore_sets_the_file_aside_and_lifts_the_quarantine(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: `virgo stamp restore` puts the stored bytes back, keeps the altered file for
    whoever investigates, lifts the quarantine once the file verifies: standing, card and
    directory again, with an audit event."""
    altered = fleet["Altered"]
    data = alter(altered)
    sweep()
    assert card_status(altered) == 404
    out = StringIO()
    call_command("stamp", "restore", str(altered.uuid), stdout=out)
    assert "quarantine lifted: it stands again" in out.getvalue()
    [aside] = file_of(altered).parent.glob("CAPABILITY-STAMP.json.set-aside-*")
    assert aside.read_bytes() == data
    assert file_of(altered).read_bytes() == stored_bytes(altered)
    assert standing(altered) is True
    assert Generation.objects.get(persona=altered, number=1).not_standing_reasons == []
    assert card_status(altered) == 200
    assert load_active_stamp(altered).mcp_tools
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.STAMP_RESTORED)
    assert event.data == {
        "generation": 1,
        "path": str(file_of(altered)),
        "set_aside": str(aside),
        "lifted": True,
    }
    call_command("check")


def test_restore_refuses_when_the_stored_stamp_itself_does_not_verify(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: bytes stored broken (a faulty factory) cannot be restored from: the persona
    stays quarantined and the command says why."""
    persona = fleet["Other"]
    store_as_stamp(persona, b'{"schema_version": 3}')
    with pytest.raises(StampUnavailable):
        load_active_stamp(persona)
    out = StringIO()
    with pytest.raises(CommandError, match="the stored stamp itself does not verify"):
        call_command("stamp", "restore", str(persona.uuid), stdout=out)
    assert "virgo.E003" in out.getvalue()
    assert standing(persona) is False


def test_a_new_generation_brings_a_quarantined_persona_back(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: any change to the persona makes a new generation whose new file stands; the
    quarantined generation stays as it was."""
    altered = fleet["Altered"]
    alter(altered)
    sweep()
    altered = update_persona(altered, queues=["reviews", "triage"])
    assert altered.generation == 2 and altered.standing is True
    assert card_status(altered) == 200
    assert Generation.objects.get(persona=altered, number=1).standing is False


def test_an_owner_cannot_lift_a_quarantine_by_saving_or_listing_the_persona(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: an owner whose persona is quarantined saves it unchanged, lists it again and
    tries to write `standing`: it stays quarantined, unlisted and without a public card."""
    altered = fleet["Altered"]
    owner = altered.agent.owner
    alter(altered)
    sweep()
    client = token_client(owner)
    url = f"/api/personas/{altered.uuid}/"
    assert client.patch(url, {"standing": True}, format="json").status_code == 400
    for change in (
        {"queues": list(altered.queues)},
        {"discoverable": False},
        {"discoverable": True},
    ):
        assert client.patch(url, change, format="json").status_code == 200, change
    assert standing(altered) is False
    assert altered.generation == 1
    assert card_status(altered) == 404
    assert "Altered" not in listed(make_owner("reader"))


def test_the_admin_shows_which_file_and_why(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: the persona's page and its stamp page say QUARANTINED, the file, the reason and
    the way out; the audit trail has the event."""
    altered = fleet["Altered"]
    alter(altered)
    sweep()
    client = Client()
    client.force_login(altered.agent.owner)
    page = client.get(f"/admin/personas/persona/{altered.pk}/change/").content.decode()
    assert "QUARANTINED" in page
    assert f"stamp file {file_of(altered)} was altered" in page
    assert f"virgo stamp restore {altered.uuid}" in page
    assert "Stamp quarantined" in page
    stamp = client.get(f"/admin/personas/persona/{altered.pk}/generations/1/stamp/")
    text = stamp.content.decode()
    assert "QUARANTINED" in text and "ALTERED" in text


def test_a_file_the_machine_cannot_read_is_refused_not_quarantined(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: an OS error is the machine's condition (often every file's at once), not the
    persona's: the runtime refuses, the sweep reports it, nobody is quarantined."""
    persona = fleet["Kept"]
    path = file_of(persona)
    path.unlink()
    path.mkdir()
    with pytest.raises(StampUnavailable, match="cannot be read"):
        load_active_stamp(persona)
    assert sweep().unreadable == [str(persona.uuid)]
    assert standing(persona) is True
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_QUARANTINED).exists()


def test_a_lost_file_the_disk_will_not_take_is_refused_not_quarantined(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: a missing file whose writing fails on load (here EFBIG: this process may write no
    file past 1 KiB, less than a stamp) is a refusal naming why, never a crash, and quarantines
    nobody; the sweep does not write absent files (VX-SCALE-2), so it finds nothing."""
    persona = fleet["Lost"]
    file_of(persona).unlink()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
    try:
        with pytest.raises(StampUnavailable, match="is missing and cannot be written"):
            load_active_stamp(persona)
        assert sweep().unreadable == []
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert standing(persona) is True
    assert not file_of(persona).exists()
    assert load_active_stamp(persona).mcp_tools
    assert file_of(persona).read_bytes() == stored_bytes(persona)


def test_beat_runs_the_sweep_at_the_configured_interval(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: the sweep is a beat entry every VIRGO_STAMP_VERIFY_INTERVAL_SECONDS, and its
    task quarantines what it finds."""
    entry = settings.CELERY_BEAT_SCHEDULE["verify-stamp-files"]
    assert entry["task"] == "stamps.tasks.verify_stamp_files"
    assert entry["schedule"] == settings.VIRGO_STAMP_VERIFY_INTERVAL_SECONDS == 300
    alter(fleet["Altered"])
    assert verify_stamp_files() == 1
    assert standing(fleet["Altered"]) is False


def test_stamp_show_says_quarantined(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: `virgo stamp show` of a quarantined persona names the reason and still shows
    the stored stamp."""
    altered = fleet["Altered"]
    alter(altered)
    sweep()
    out = StringIO()
    call_command("stamp", "show", str(altered.uuid), stdout=out)
    shown = out.getvalue()
    assert "QUARANTINED:" in shown and "was altered" in shown
    assert json.loads(shown[shown.index("{") :])["persona"]["id"] == str(altered.uuid)


# What a repair and a restore leave behind ------------------------------------------------------


def named(persona: Persona) -> str:
    return f"persona {persona.name!r} ({persona.uuid}) generation {persona.generation}"


def inside_another_action(work: Callable[..., Any]) -> Callable[..., Any]:
    """`work` as an audited action inside an outer one, where all it records but consequences
    is dropped (personas.audit.action)."""
    return audit.action(audit.action(work))


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The lines stamps.quarantine logged (the eager Celery tasks log their own)."""
    return [r.getMessage() for r in caplog.records if r.name == "stamps.quarantine"]


def test_a_repair_says_which_file_and_is_recorded_as_a_consequence(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: a file others may read, found by the sweep inside another audited action, is
    made owner-private: one WARNING line naming the persona, the file, the repair and who found
    it, and one "stamp repaired" event about that persona with the same facts, recorded though
    the action around it records for itself (a consequence); the check's warning names it."""
    kept = fleet["Kept"]
    path = file_of(kept)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="stamps.quarantine"):
        report = inside_another_action(sweep)()
    assert report.repaired == [str(kept.uuid)]
    assert path.stat().st_mode & 0o777 == 0o600
    assert said(caplog) == [
        f"{named(kept)}: stamp file {path} made owner-private (mode 600) "
        "(found by the verification sweep)"
    ]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.STAMP_REPAIRED)
    assert event.persona == kept
    assert event.data == {
        "generation": 1,
        "path": str(path),
        "repair": "made owner-private (mode 600)",
        "found_by": "the verification sweep",
    }
    path.chmod(0o644)
    [warning] = settle(
        Generation.objects.get(persona=kept, number=1),
        stamp_file_messages(Generation.objects.get(persona=kept, number=1)),
        found_by=FoundBy.CHECK,
    )
    assert (warning.id, warning.obj) == ("virgo.W004", kept)


def test_restoring_one_quarantined_persona_leaves_another_quarantined(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: of two personas quarantined at the same generation, restoring one lifts its
    quarantine alone; the altered file is set aside under the UTC time it was found; one INFO
    line says what was restored, where the old file is kept and that the quarantine is lifted;
    the event is about that persona, and recorded inside an outer action too."""
    first, second = fleet["Altered"], fleet["Other"]
    alter(first)
    alter(second)
    assert sorted(sweep().quarantined) == sorted([str(first.uuid), str(second.uuid)])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="stamps.quarantine"):
        restoration = inside_another_action(restore)(persona=first)
    assert restoration.ok and restoration.lifted
    assert restoration.generation.standing is True
    assert re.fullmatch(
        r"CAPABILITY-STAMP\.json\.set-aside-\d{8}T\d{12}Z", restoration.set_aside.name
    )
    assert (standing(first), standing(second)) == (True, False)
    assert Generation.objects.get(persona=second, number=1).standing is False
    assert said(caplog) == [
        f"{named(first)}: stamp file {file_of(first)} restored from the stored stamp (the file "
        f"found there is kept as {restoration.set_aside}); quarantine lifted"
    ]
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.STAMP_RESTORED).persona == first


def test_restoring_a_lost_file_of_a_standing_persona_sets_nothing_aside_and_lifts_nothing(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: restore of a persona at its second generation whose file is not there writes
    the stored bytes, sets nothing aside, lifts nothing (it stands): the line and the event say
    exactly that."""
    persona = update_persona(fleet["Lost"], description="a second generation")
    assert persona.generation == 2
    file_of(persona).unlink()
    with caplog.at_level(logging.INFO, logger="stamps.quarantine"):
        restoration = restore(persona=persona)
    assert restoration.ok and not restoration.lifted and restoration.set_aside is None
    assert file_of(persona).read_bytes() == stored_bytes(persona)
    assert said(caplog) == [
        f"{named(persona)}: stamp file {file_of(persona)} restored from the stored stamp"
    ]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.STAMP_RESTORED)
    assert event.data == {
        "generation": 2,
        "path": str(file_of(persona)),
        "set_aside": "",
        "lifted": False,
    }


def test_a_quarantine_says_why_once_and_how_to_bring_it_back(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: the first reader to quarantine a generation gets True and logs one ERROR line
    naming the persona, every reason and the restore command; a second gets False. The sweep
    then says in one INFO line what it did; `virgo check` says the same reasons and the way
    back, about that persona (virgo.E012), and "no reason recorded" where none was."""
    altered = fleet["Altered"]
    generation = Generation.objects.get(persona=altered, number=1)
    with caplog.at_level(logging.INFO, logger="stamps.quarantine"):
        assert quarantine(generation, ["one", "two"], found_by=FoundBy.LOAD) is True
        assert quarantine(generation, ["again"], found_by=FoundBy.LOAD) is False
    assert said(caplog) == [
        f"{named(altered)}: stamp quarantined: quarantined by the runtime's load; one; two. Its "
        "card is withdrawn and its runtime refuses until the file is restored "
        f"(`virgo stamp restore {altered.uuid}`) or a new generation is made."
    ]
    generation.refresh_from_db()
    message = quarantine_message(generation)
    assert (message.id, message.obj) == ("virgo.E012", altered)
    assert message.msg == (
        f"{named(altered)} is quarantined: quarantined by the runtime's load; one; two"
    )
    assert message.hint == (
        f"Restore its file from the stored stamp with `virgo stamp restore {altered.uuid}`, "
        "or make a new generation."
    )
    generation.not_standing_reasons = []
    assert quarantine_message(generation).msg.endswith("is quarantined: no reason recorded")


@pytest.mark.parametrize("fault", ["readable by others", "altered"])
def test_the_sweep_says_what_it_did_in_one_line_and_nothing_when_it_did_nothing(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """VX-OPS-4: a sweep that repaired a file, or quarantined one, ends with one INFO line of
    its counts; a sweep that found everything in order says nothing."""
    persona = fleet["Kept"]
    if fault == "altered":
        alter(persona)
    else:
        file_of(persona).chmod(0o644)
    caplog.set_level(logging.INFO, logger="stamps.quarantine")
    sweep()
    repaired, quarantined = (1, 0) if fault == "readable by others" else (0, 1)
    assert said(caplog)[-1] == (
        f"stamp sweep: 4 files verified, {repaired} repaired, {quarantined} quarantined, "
        "0 unreadable"
    )
    caplog.clear()
    sweep()
    assert said(caplog) == []


def test_the_sweep_reads_only_each_personas_current_generation(fleet: dict[str, Persona]) -> None:
    """VX-OPS-4: a file of a generation the persona has moved on from is not its stamp any
    more: the sweep neither reads nor quarantines it, and the persona keeps standing."""
    persona = update_persona(fleet["Kept"], description="its second generation")
    old = stamp_path(persona.uuid, 1)
    old.write_bytes(old.read_bytes().replace(b'"access":"allow"', b'"access":"confirm"', 1))
    report = sweep()
    assert report.quarantined == [] and report.verified == 4
    assert standing(persona) is True


def card_token(persona: Persona) -> str | None:
    return fastpath._shared().count_and_token("192.0.2.1", str(persona.uuid), 60)[2]


def test_a_quarantine_and_its_lifting_move_the_card_token_again_once_committed(
    fleet: dict[str, Persona], django_capture_on_commit_callbacks: Any
) -> None:
    """VX-OPS-4: a web process that read the rows between the change and its commit may have
    kept the old card under the new token, so the token moves once more after the commit; for a
    quarantine and for the restore that lifts it alike (cards.fastpath.card_changed)."""
    altered = fleet["Altered"]
    generation = Generation.objects.get(persona=altered, number=1)
    before = card_token(altered)
    with django_capture_on_commit_callbacks(execute=True):
        assert quarantine(generation, ["checked by hand"], found_by=FoundBy.LOAD)
        inside = card_token(altered)
    assert before != inside != card_token(altered)
    with django_capture_on_commit_callbacks(execute=True):
        assert restore(persona=altered).lifted
        inside = card_token(altered)
    assert inside != card_token(altered)


def test_a_quarantine_of_a_generation_no_longer_current_leaves_the_persona_standing(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4: a reader that loaded generation 1 may quarantine it after generation 2 became
    current; that takes generation 1 out of service, never the persona's current one."""
    kept = fleet["Kept"]
    old = Generation.objects.get(persona=kept, number=1)
    update_persona(kept, description="A second generation.")
    kept.refresh_from_db()
    assert kept.generation == 2 and standing(kept) is True
    assert quarantine(old, ["checked by hand"], found_by=FoundBy.LOAD)
    old.refresh_from_db()
    assert old.standing is False
    assert standing(kept) is True


def test_a_quarantine_is_recorded_with_its_facts_inside_another_action(
    fleet: dict[str, Persona],
) -> None:
    """VX-OPS-4, VX-AUDIT-1: a quarantine found while another audited action runs is still one
    event of its own (a consequence), with the generation, the file, the reasons and the finder."""
    altered = fleet["Altered"]
    generation = Generation.objects.get(persona=altered, number=1)
    assert inside_another_action(quarantine)(generation, ["one"], found_by=FoundBy.LOAD)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.STAMP_QUARANTINED)
    assert event.persona == altered
    assert event.data == {
        "generation": 1,
        "path": str(file_of(altered)),
        "reasons": ["quarantined by the runtime's load", "one"],
        "found_by": "the runtime's load",
    }


def test_a_repair_the_file_system_refuses_is_logged_and_quarantines_nobody(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-OPS-4: a file others may read that cannot be made private (the file system refuses:
    read-only, another owner) is the machine's condition: one ERROR line naming the persona and
    why, the findings returned as they were, no repair recorded, the persona still standing."""
    kept = fleet["Kept"]
    file_of(kept).chmod(0o644)
    generation = Generation.objects.get(persona=kept, number=1)
    found = stamp_file_messages(generation)

    def refuse(path: Any, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr("stamps.quarantine.os.chmod", refuse)
    with caplog.at_level(logging.ERROR, logger="stamps.quarantine"):
        after = settle(generation, found, found_by=FoundBy.CHECK)
    assert [(m.id, m.msg) for m in after] == [(m.id, m.msg) for m in found]
    assert said(caplog) == [
        f"{named(kept)}: the stamp file cannot be repaired: [Errno 1] Operation not permitted: "
        f"'{file_of(kept)}'"
    ]
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()
    assert standing(kept) is True


def test_a_repair_that_does_not_hold_quarantines_with_what_is_still_wrong(
    fleet: dict[str, Persona], monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-OPS-4: a repair the file system accepts but that does not hold (the mode is still
    open when the file is read again) quarantines the persona, and the findings returned are the
    repair's warning followed by what is still wrong."""
    kept = fleet["Kept"]
    file_of(kept).chmod(0o644)
    generation = Generation.objects.get(persona=kept, number=1)
    monkeypatch.setattr("stamps.quarantine.os.chmod", lambda path, mode: None)
    after = settle(generation, stamp_file_messages(generation), found_by=FoundBy.CHECK)
    still = stamp_file_messages(generation)
    assert [m.id for m in after] == ["virgo.W004", *(m.id for m in still)]
    assert any(m.is_serious() for m in still)
    assert standing(kept) is False
    generation.refresh_from_db()
    assert generation.not_standing_reasons[0] == "quarantined by virgo check"


def test_an_unreadable_file_is_one_error_line_saying_why(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-OPS-4: the sweep that cannot read a file logs what the check found, as one ERROR line,
    and quarantines nobody."""
    kept = fleet["Kept"]
    file_of(kept).unlink()
    file_of(kept).mkdir()
    generation = Generation.objects.get(persona=kept, number=1)
    serious = [m.msg for m in stamp_file_messages(generation) if m.is_serious()]
    assert serious
    with caplog.at_level(logging.ERROR, logger="stamps.quarantine"):
        assert sweep().unreadable == [str(kept.uuid)]
    assert said(caplog) == ["; ".join(serious)]


def test_a_file_materialised_on_load_says_so_at_debug_only(
    fleet: dict[str, Persona], caplog: pytest.LogCaptureFixture
) -> None:
    """VX-SCALE-2: writing the file of a persona this machine never ran is no event: one DEBUG
    line naming the persona and the file, nothing louder."""
    lost = fleet["Lost"]
    file_of(lost).unlink()
    with caplog.at_level(logging.DEBUG, logger="stamps.quarantine"):
        assert load_active_stamp(lost).mcp_tools
    assert said(caplog) == [
        f"{named(lost)}: stamp file {file_of(lost)} materialised from the stored stamp"
    ]
    assert {r.levelno for r in caplog.records if r.name == "stamps.quarantine"} == {logging.DEBUG}


def test_a_persona_that_does_not_stand_for_another_reason_is_not_quarantined() -> None:
    """VX-REL-4: the quarantine count is of personas whose current generation has a stored stamp
    its file no longer holds: a persona whose current generation could never be stamped (its
    earlier one was) is out of service, but not quarantined."""
    broken = broken_generation(standing_persona(), "resolve_decision")
    assert broken.standing is False
    assert broken not in quarantined_personas()


def test_a_missing_file_no_stored_stamp_vouches_for_is_quarantined_not_passed_over() -> None:
    """VX-REL-4, VX-SCALE-2: a file missing here is passed over only because the stored stamp
    will materialise it where the persona runs. A generation recorded as standing with no stored
    stamp (a database edited behind every guard) has nothing to materialise it from: the sweep
    quarantines it."""
    persona = standing_persona()
    standing_without_stored_stamp(persona).unlink()
    report = sweep()
    assert (report.quarantined, report.not_here) == ([str(persona.uuid)], 0)
    assert standing(persona) is False
