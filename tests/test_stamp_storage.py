"""Stored stamps and their files: owner-private, written once, immutable in the ORM and the DB."""

import os
import stat
import time
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import TestCase

from personas import services
from personas.models import Generation, Persona
from settling.publication import publish_generation
from stamps import storage
from stamps.models import CapabilityStamp, StampImmutable
from stamps.services import build_current_stamps, build_generation_stamp
from stamps.storage import ABANDONED_AFTER_SECONDS, stamp_path
from tests.factories import (
    REVIEWER_VERBS,
    address,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
    update_persona,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_each_generation_has_one_owner_private_file(persona: Persona, virgo_home: Path) -> None:
    """V1-STAMP-1: <VIRGO_HOME>/personas/<uuid>/generations/<n>/CAPABILITY-STAMP.json, 0600 in
    0700 directories, holding exactly the stored canonical bytes."""
    stored = CapabilityStamp.objects.get()
    path = virgo_home / "personas" / str(persona.uuid) / "generations" / "1"
    assert stored.path == path / "CAPABILITY-STAMP.json" == stamp_path(persona.uuid, 1)
    assert stored.path.read_bytes() == stored.data
    assert mode(stored.path) == 0o600
    for directory in (path, path.parent, path.parent.parent, virgo_home / "personas"):
        assert mode(directory) == 0o700, directory
    assert [p.name for p in path.iterdir()] == ["CAPABILITY-STAMP.json"]


def test_building_a_generation_again_returns_the_stored_stamp_untouched(
    persona: Persona,
) -> None:
    """V1-STAMP-2: idempotent per (persona, generation); the file is never rewritten."""
    stored = CapabilityStamp.objects.get()
    before = stored.path.stat()
    generation = persona.generations.get()
    again = build_generation_stamp(generation=generation)
    publish_generation(persona.pk)
    assert again.stamp is not None and again.stamp.pk == stored.pk
    assert CapabilityStamp.objects.count() == 1
    after = stored.path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_new_generation_gets_a_new_file_and_leaves_the_old_one(persona: Persona) -> None:
    """V1-STAMP-1, V1-STAMP-2: a change stamps generation 2; generation 1's file stays as it was."""
    first = CapabilityStamp.objects.get()
    before = first.path.read_bytes(), first.path.stat().st_mtime_ns
    persona = update_persona(persona, queues=["reviews", "triage"])
    second = CapabilityStamp.objects.get(generation_number=2)
    assert second.path != first.path
    assert second.stamp_hash != first.stamp_hash
    assert (first.path.read_bytes(), first.path.stat().st_mtime_ns) == before


def test_a_lost_file_is_restored_byte_for_byte(persona: Persona) -> None:
    """V1-STAMP-2: the stored stamp is the source; a lost file comes back identical."""
    stored = CapabilityStamp.objects.get()
    stored.path.unlink()
    build_generation_stamp(generation=persona.generations.get())
    assert stored.path.read_bytes() == stored.data
    assert mode(stored.path) == 0o600


def test_a_foreign_file_in_the_way_is_never_overwritten(persona: Persona) -> None:
    """V1-STAMP-2: a different file already at the next generation's path stays; the generation
    does not stand and says why."""
    planted = stamp_path(persona.uuid, 2)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b'{"planted": true}')
    persona = update_persona(persona, queues=["triage"])
    generation = persona.generations.get(number=2)
    assert generation.standing is False
    assert persona.standing is False
    assert (
        "already holds a different stamp; a stamp file is never rewritten"
        in (generation.not_standing_reasons[0])
    )
    assert planted.read_bytes() == b'{"planted": true}'
    assert not CapabilityStamp.objects.filter(generation_number=2).exists()


def test_the_orm_refuses_every_change(persona: Persona) -> None:
    """V1-STAMP-2: save of a stored stamp, delete, queryset update/delete and bulk update fail."""
    stored = CapabilityStamp.objects.get()
    stored.stamp_hash = "0" * 64
    with pytest.raises(StampImmutable):
        stored.save()
    with pytest.raises(StampImmutable):
        stored.delete()
    with pytest.raises(StampImmutable):
        CapabilityStamp.objects.filter(pk=stored.pk).update(stamp_hash="0" * 64)
    with pytest.raises(StampImmutable):
        CapabilityStamp.objects.all().delete()
    with pytest.raises(StampImmutable):
        CapabilityStamp.objects.bulk_update([stored], ["stamp_hash"])
    fresh = CapabilityStamp.objects.get()
    assert fresh.stamp_hash == persona.generations.get().stamp_hash


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE stamps_capabilitystamp SET stamp_hash = 'x'",
        "UPDATE stamps_capabilitystamp SET body = body",
        "DELETE FROM stamps_capabilitystamp",
    ],
)
def test_the_database_refuses_every_change(persona: Persona, statement: str) -> None:
    """V1-STAMP-2: a trigger refuses UPDATE, and DELETE while the generation exists, whatever
    client sends it."""
    stored = CapabilityStamp.objects.get()
    with (
        pytest.raises(DatabaseError, match="immutable"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement)
    assert CapabilityStamp.objects.get().data == stored.data


def test_deleting_the_persona_removes_the_stamp_row_after_its_generation(
    persona: Persona,
) -> None:
    """V1-STAMP-2: a stamp leaves only with its generation; its file stays in VIRGO_HOME."""
    path = CapabilityStamp.objects.get().path
    services.persona_delete(persona=persona, actor=persona.agent.owner)
    assert not Generation.objects.exists()
    assert not CapabilityStamp.objects.exists()
    assert path.exists()


def test_a_rejected_stamp_writes_nothing(virgo_home: Path) -> None:
    """V1-FAC-4: a stamp that fails validation is neither stored nor written."""
    agent = make_agent(make_owner())
    persona = make_persona(
        agent, verb_subset=[*standing_verbs("coder-deputy", *REVIEWER_VERBS), "create_for"]
    )
    assert persona.standing is False
    assert not CapabilityStamp.objects.exists()
    assert list(virgo_home.rglob("*.json")) == []


def test_a_pending_generation_has_no_file(virgo_home: Path) -> None:
    """V1-STAMP-1: until the task runs the stamp is owed, and nothing is on disk yet."""
    agent = make_agent(make_owner())
    with run_on_commit() as callbacks:
        persona = services.persona_create(
            agent=agent,
            actor=agent.owner,
            name="Pending",
            system_prompt="You review.",
            persona_class="coder-deputy",
            address=address("work/core/reviewer"),
            verb_subset=standing_verbs("coder-deputy"),
        )
        persona.refresh_from_db()
        assert persona.standing is None
        assert not stamp_path(persona.uuid, 1).exists()
    assert callbacks
    persona.refresh_from_db()
    assert persona.standing is True


def owed_personas(count: int) -> list[Persona]:
    """Personas whose first stamps are owed: their on-commit work is dropped, not run."""
    agent = make_agent(make_owner())
    with TestCase.captureOnCommitCallbacks(execute=False):
        return [
            services.persona_create(
                agent=agent,
                actor=agent.owner,
                name=f"Batch {number}",
                system_prompt="You review.",
                persona_class="coder-deputy",
                address=address(f"work/core/reviewer-{number}"),
                verb_subset=standing_verbs("coder-deputy"),
                queues=["reviews"],
            )
            for number in range(count)
        ]


def test_a_batch_writes_every_file_as_one_write_would(virgo_home: Path) -> None:
    """V1-STAMP-1, V1-STAMP-2: the fan-out's batch write leaves each file 0600 in 0700
    directories with exactly the stored bytes, and no temporary file behind."""
    personas = owed_personas(3)
    outcomes = build_current_stamps(personas=personas)
    assert [outcome.standing for outcome in outcomes] == [True, True, True]
    for persona, outcome in zip(personas, outcomes, strict=True):
        assert outcome.stamp is not None
        path = stamp_path(persona.uuid, 1)
        assert path.read_bytes() == CapabilityStamp.objects.get(persona_uuid=persona.uuid).data
        assert mode(path) == 0o600
        for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
            assert mode(directory) == 0o700, directory
    assert list(virgo_home.rglob("*.tmp")) == []


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o277])
def test_a_batch_is_owner_private_under_any_umask(virgo_home: Path, umask: int) -> None:
    """V1-STAMP-1, VX-SEC-9: the batch skips chmod only when the umask keeps every owner bit;
    one that takes some (0277 would leave directories unwritable and files unreadable) still
    gets 0700 directories and 0600 files."""
    files = [(stamp_path(f"umask-{umask:o}-{number}", 1), b"{}") for number in range(2)]
    previous = os.umask(umask)
    try:
        assert storage._umask_keeps_owner_bits() is not bool(umask & 0o700)
        assert storage.write_stamp_files(files) == {}
    finally:
        os.umask(previous)
    for path, data in files:
        assert path.read_bytes() == data
        assert mode(path) == 0o600
        for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
            assert mode(directory) == 0o700, directory


@pytest.mark.parametrize("there", ["nothing", "the persona's directory", "its generations"])
def test_a_first_generation_is_written_whatever_directories_are_there(
    virgo_home: Path, there: str
) -> None:
    """V1-STAMP-1, VX-SEC-9: a batch makes a first generation's directories from the top (a new
    persona has none) and falls back to finding what is missing from the bottom when some are
    there already, or VIRGO_HOME has no personas directory yet; each is 0700 even under a
    umask that takes owner bits, and a directory already there is left as it was."""
    path = stamp_path(f"first-{there.split()[-1]}", 1)
    kept = {"nothing": None, "the persona's directory": 3, "its generations": 2}[there]
    if kept is not None:
        for directory in reversed(path.parents[kept - 1 : -1]):
            directory.mkdir(mode=0o700, exist_ok=True)
        (path.parents[kept - 1] / "kept").write_bytes(b"")
    previous = os.umask(0o277)
    try:
        assert storage.write_stamp_files([(path, b"{}")]) == {}
    finally:
        os.umask(previous)
    assert path.read_bytes() == b"{}"
    assert mode(path) == 0o600
    for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert mode(directory) == 0o700, directory
    if kept is not None:
        assert (path.parents[kept - 1] / "kept").exists()
    assert list(virgo_home.rglob("*.tmp")) == []


def test_a_batch_flushes_once_and_before_any_link(
    virgo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V1-STAMP-2: every file's bytes are made durable before a name points at them, and one
    flush does it for the whole batch (the links need none: a lost one is a missing file,
    written again from the stored row, tests/test_stamp_machines.py)."""
    steps: list[str] = []
    flush, link = storage._flush_filesystem, os.link
    monkeypatch.setattr(
        storage, "_flush_filesystem", lambda directory: (steps.append("flush"), flush(directory))
    )
    monkeypatch.setattr(
        storage.os, "link", lambda source, target: (steps.append("link"), link(source, target))
    )
    files = [(stamp_path(f"flush-{number}", 1), b"{}") for number in range(3)]
    assert storage.write_stamp_files(files) == {}
    assert steps == ["flush", "link", "link", "link"]
    assert all(path.read_bytes() == b"{}" for path, _ in files)


def test_a_file_in_the_way_fails_only_its_own_generation_in_a_batch(virgo_home: Path) -> None:
    """V1-STAMP-2: in a batch, a foreign file at one generation's path stays as it was; that
    generation does not stand and says why, and the others are written and stand."""
    personas = owed_personas(3)
    planted = stamp_path(personas[1].uuid, 1)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b'{"planted": true}')
    outcomes = build_current_stamps(personas=personas)
    assert [outcome.standing for outcome in outcomes] == [True, False, True]
    assert "a stamp file is never rewritten" in outcomes[1].reasons[0]
    assert planted.read_bytes() == b'{"planted": true}'
    refused = Generation.objects.get(persona=personas[1])
    assert refused.standing is False
    assert refused.not_standing_reasons == outcomes[1].reasons
    assert Persona.objects.get(pk=personas[1].pk).standing is False
    assert set(CapabilityStamp.objects.values_list("persona_uuid", flat=True)) == {
        personas[0].uuid,
        personas[2].uuid,
    }
    assert stamp_path(personas[2].uuid, 1).exists()
    assert list(virgo_home.rglob("*.tmp")) == []


def test_an_identical_file_already_there_is_kept_in_a_batch(virgo_home: Path) -> None:
    """V1-STAMP-2: a batch whose transaction rolled back after its files were written is run
    again: the files already hold the very bytes, so they are kept and the generations stand."""
    personas = owed_personas(2)
    with pytest.raises(RuntimeError), transaction.atomic():
        build_current_stamps(personas=personas)
        raise RuntimeError("the worker died before the commit")
    assert not CapabilityStamp.objects.exists()
    paths = [stamp_path(persona.uuid, 1) for persona in personas]
    before = [(path.read_bytes(), path.stat().st_ino) for path in paths]
    outcomes = build_current_stamps(personas=personas)
    assert [outcome.standing for outcome in outcomes] == [True, True]
    assert [(path.read_bytes(), path.stat().st_ino) for path in paths] == before
    assert [bytes(stamp.data) for stamp in CapabilityStamp.objects.order_by("pk")] == [
        data for data, _ in before
    ]


def leave_temporary(directory: Path, name: str, *, age_seconds: float) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    left = directory / f".CAPABILITY-STAMP.json.{name}.tmp"
    left.write_bytes(b'{"half": ')
    moment = time.time() - age_seconds
    os.utime(left, (moment, moment))
    return left


@pytest.mark.parametrize("path", ["batch", "single"])
def test_what_a_killed_writer_left_is_swept_by_the_next_one(virgo_home: Path, path: str) -> None:
    """V1-STAMP-1: a temporary file a killed writer left in the generation's directory is
    removed when the stamp is written again; one young enough to be a live write's stays."""
    [persona] = owed_personas(1)
    directory = stamp_path(persona.uuid, 1).parent
    abandoned = leave_temporary(directory, "killed", age_seconds=2 * ABANDONED_AFTER_SECONDS)
    live = leave_temporary(directory, "live", age_seconds=5)
    if path == "batch":
        [outcome] = build_current_stamps(personas=[persona])
    else:
        outcome = build_generation_stamp(generation=persona.generations.get())
    assert outcome.standing
    assert not abandoned.exists()
    assert live.exists()
    assert stamp_path(persona.uuid, 1).read_bytes() == CapabilityStamp.objects.get().data
