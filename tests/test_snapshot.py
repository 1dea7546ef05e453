"""Persona snapshots: versioned, stamps byte for byte, the experience layer travelling along."""

import io
import json
import tarfile
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command

from personas import services
from runtime import confirmations, registry
from runtime.models import DecisionRecord, PromptRegistryEntry
from runtime.snapshot import SnapshotError, export_persona, import_persona, read_archive
from runtime.stamp import load_active_stamp
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, run_on_commit, update_persona
from tests.runtime_support import call, correlation, standing_persona

pytestmark = pytest.mark.django_db

DELETE = {"path": "memory/old.md", "mode": "delete"}


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def taught(persona) -> PromptRegistryEntry:
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})
    cid = correlation()
    call(persona, "workspace_write", DELETE, cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    return registry.learn(record=record, user=persona.agent.owner)


def two_generations(persona):
    return update_persona(persona, queues=["reviews", "triage"])


def delete_persona(persona) -> None:
    with run_on_commit():
        services.persona_delete(persona=persona, actor=persona.agent.owner)


def import_as(archive: Path, agent, actor=None):
    with run_on_commit():
        outcome = import_persona(archive, agent=agent, actor=actor or agent.owner)
    outcome.persona.refresh_from_db()
    return outcome


def test_the_archive_is_versioned_and_holds_stamps_byte_for_byte(tmp_path: Path) -> None:
    """V1-PR-4: persona, generations, stamps and experience layer in one versioned archive."""
    persona = two_generations(standing_persona())
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    with tarfile.open(archive) as tar:
        assert tar.getnames()[0] == "manifest.json"
        manifest = json.loads(tar.extractfile("manifest.json").read())
    members = read_archive(archive)
    assert (manifest["format"], manifest["version"], manifest["persona"]) == (
        "virgo-persona-snapshot",
        1,
        str(persona.uuid),
    )
    for number in (1, 2):
        on_disk = stamp_path(persona.uuid, number).read_bytes()
        assert members[f"stamps/{number}/CAPABILITY-STAMP.json"] == on_disk
    [entry] = json.loads(members["experience/prompt-registry.json"])
    assert entry["target_scope"] == {"path": "memory/old.md"}
    with pytest.raises(FileExistsError):
        export_persona(persona, archive)


def test_restoring_onto_the_same_agent_keeps_the_stamp_and_the_learned_choices(
    tmp_path: Path,
) -> None:
    """V1-PR-4, V1-STAMP-2: the restored persona stands on its own stamp; its choices apply."""
    persona = two_generations(standing_persona())
    entry = taught(persona)
    stamp_hash = load_active_stamp(persona).stamp_hash
    stored = {
        s.generation_number: s.data
        for s in CapabilityStamp.objects.filter(persona_uuid=persona.uuid)
    }
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent, uuid = persona.agent, persona.uuid
    delete_persona(persona)
    outcome = import_as(archive, agent)
    restored = outcome.persona
    assert (restored.uuid, restored.generation, restored.standing) == (uuid, 2, True)
    assert restored.discoverable is False
    assert {
        s.generation_number: s.data for s in CapabilityStamp.objects.filter(persona_uuid=uuid)
    } == stored
    assert load_active_stamp(restored).stamp_hash == stamp_hash
    [copy] = restored.prompt_registry_entries.all()
    assert (copy.key_digest, copy.stamp_hash) == (entry.key_digest, entry.stamp_hash)
    call(restored, "workspace_write", {"path": "memory/old.md", "content": "x"})
    assert call(restored, "workspace_write", DELETE)["ok"] is True


def test_moving_to_another_owner_opens_a_generation_and_choices_wait_for_review(
    tmp_path: Path,
) -> None:
    """V1-PR-3, V1-PR-4: a new owner means a new stamp; learned choices wait for their review."""
    persona = standing_persona()
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    new_owner = make_owner()
    outcome = import_as(archive, make_agent(new_owner))
    restored = outcome.persona
    assert restored.generation == 2 and restored.standing is True
    stamp = load_active_stamp(restored)
    assert stamp.human_owner == f"user:{new_owner.pk}"
    call(restored, "workspace_write", {"path": "memory/old.md", "content": "x"})
    held = call(restored, "workspace_write", DELETE)
    assert held["code"] == "confirmation_required"
    assert DecisionRecord.objects.get(correlation_id=held["correlation_id"]).authority_user == (
        new_owner
    )
    [outcome_] = registry.carry_forward(
        entries=list(restored.prompt_registry_entries.all()), reviewer=new_owner
    )
    assert outcome_.carried is not None
    assert call(restored, "workspace_write", DELETE)["ok"] is True


def test_only_the_agents_owner_imports_and_staff_alone_bring_class_overlay_entries(
    tmp_path: Path,
) -> None:
    persona = standing_persona()
    record_cid = correlation()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})
    call(persona, "workspace_write", DELETE, record_cid)
    record = confirmations.decide(
        record=DecisionRecord.objects.get(correlation_id=record_cid),
        approve=True,
        user=persona.agent.owner,
    )
    staff = make_owner()
    staff.is_superuser = True
    staff.save()
    registry.learn_for_class(record=record, user=staff)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    PromptRegistryEntry.objects.all().delete()
    target = make_agent(make_owner())
    with pytest.raises(PermissionDenied):
        import_persona(archive, agent=target, actor=make_owner())
    outcome = import_as(archive, target)
    assert outcome.overlay_entries == 0 and "staff only" in outcome.skipped[0]
    assert not PromptRegistryEntry.objects.filter(location="class-overlay").exists()


def _rewrite(archive: Path, target: Path, change) -> Path:
    members = {}
    with tarfile.open(archive) as tar:
        for info in tar:
            members[info.name] = tar.extractfile(info).read()
    change(members)
    with tarfile.open(target, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return target


def test_bad_archives_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent = persona.agent

    def future(members):
        manifest = json.loads(members["manifest.json"])
        manifest["version"] = 99
        members["manifest.json"] = json.dumps(manifest).encode()

    def tampered(members):
        members["stamps/1/CAPABILITY-STAMP.json"] += b" "

    def escaping(members):
        members["../evil"] = b"x"

    with pytest.raises(SnapshotError, match="already exists"):
        import_persona(archive, agent=agent, actor=agent.owner)
    delete_persona(persona)
    for name, change, message in [
        ("future", future, "not supported"),
        ("tampered", tampered, "manifest hash"),
        ("escaping", escaping, "unexpected archive member"),
    ]:
        bad = _rewrite(archive, tmp_path / f"{name}.tar.gz", change)
        with pytest.raises(SnapshotError, match=message):
            import_persona(bad, agent=agent, actor=agent.owner)
    assert not agent.personas.exists()


def test_the_export_and_import_commands(tmp_path: Path) -> None:
    """V1-PR-4: `virgo persona export <uuid> <file>` / `persona import <file> --agent <id>`."""
    persona = standing_persona()
    archive = tmp_path / "p.tar.gz"
    out = io.StringIO()
    call_command("persona", "export", str(persona.uuid), str(archive), stdout=out)
    assert str(archive) in out.getvalue()
    with pytest.raises(CommandError, match="never overwritten"):
        call_command("persona", "export", str(persona.uuid), str(archive))
    agent = persona.agent
    delete_persona(persona)
    out = io.StringIO()
    with run_on_commit():
        call_command("persona", "import", str(archive), "--agent", str(agent.pk), stdout=out)
    assert f"({persona.uuid})" in out.getvalue()
    with pytest.raises(CommandError, match="already exists"):
        call_command("persona", "import", str(archive), "--agent", str(agent.pk))
