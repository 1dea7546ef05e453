"""Persona snapshots: versioned, and an import that adopts nothing the archive merely claims."""

import dataclasses
import gzip
import hashlib
import io
import json
import stat
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from cards.models import PublishedCard
from personas import services
from personas.commandline import ANY_PERSONA, persona_argument
from personas.models import AuditEvent, Persona, PersonaClass
from runtime import confirmations, registry
from runtime.models import ArchivedStamp, DecisionRecord, PromptRegistryEntry, SnapshotImport
from runtime.operations import normalise
from runtime.snapshot import NAME_LENGTH, SnapshotError, export_persona, import_persona
from runtime.snapshot_format import (
    MAX_MEMBER_BYTES,
    MAX_MEMBERS,
    MAX_TOTAL_BYTES,
    _Bounded,
    _Oversized,
    read_archive,
)
from runtime.stamp import load_active_stamp
from stamps.factory import build_stamp
from stamps.models import CapabilityStamp
from stamps.services import stamp_inputs
from stamps.storage import stamp_path
from tests.factories import (
    class_verbs,
    free_address,
    make_agent,
    make_owner,
    run_on_commit,
    update_persona,
)
from tests.runtime_support import call, correlation, standing_persona
from virgo.canonical import stamp_bytes

pytestmark = pytest.mark.django_db

Review = PromptRegistryEntry.Review
DELETE = {"path": "memory/old.md", "mode": "delete"}
EXPERIENCE = "experience/prompt-registry.json"
OVERLAY = "class-overlay/prompt-registry.json"
MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def taught(persona, path: str = "memory/old.md") -> PromptRegistryEntry:
    """The owner approves one held delete and asks for the answer to be remembered."""
    call(persona, "workspace_write", {"path": path, "content": "x"})
    cid = correlation()
    call(persona, "workspace_write", {"path": path, "mode": "delete"}, cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    return registry.learn(record=record, user=persona.agent.owner)


def two_generations(persona):
    return update_persona(persona, queues=["reviews", "triage"])


def delete_persona(persona) -> None:
    with run_on_commit():
        services.persona_delete(persona=persona, actor=persona.agent.owner)


def copy_address(archive: Path, agent) -> str | None:
    """A sibling of the address the archive names when one of the owner's live personas (its
    source, exported on this installation) holds it (VX-GRANT-5); None otherwise."""
    try:
        named = json.loads(read_archive(archive).members["persona.json"])["address"]
    except (SnapshotError, KeyError, ValueError, TypeError):
        return None
    held = Persona.objects.filter(
        agent__owner_id=agent.owner_id, revoked_at__isnull=True, address__path=named
    ).exists()
    return free_address(agent, named).path if held else None


def import_as(archive: Path, agent, actor=None, *, approve: bool = True, **options: Any):
    """Import, and (unless `approve` is False) approve the grant it proposes as the owner does
    in the admin: an imported persona stands only then (VX-REV-1). The copy goes to a free
    address of the owner's unless the test names one."""
    if "address" not in options and (copy := copy_address(archive, agent)):
        options["address"] = copy
    with run_on_commit():
        outcome = import_persona(archive, agent=agent, actor=actor or agent.owner, **options)
    if approve and outcome.proposal is not None:
        with run_on_commit():
            services.proposal_approve(proposal=outcome.proposal, actor=agent.owner)
    outcome.persona.refresh_from_db()
    return outcome


def make_superuser():
    staff = make_owner()
    staff.is_superuser = True
    staff.save()
    return staff


def written() -> tuple[int, int, int, int]:
    """What an import writes: personas, imports, archived stamps, learned choices."""
    return (
        Persona.objects.count(),
        SnapshotImport.objects.count(),
        ArchivedStamp.objects.count(),
        PromptRegistryEntry.objects.count(),
    )


# Crafting archives the way an attacker would: any content, a manifest signed to match ----------


def members_of(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {info.name: tar.extractfile(info).read() for info in tar}


def pack(target: Path, members: dict[str, bytes] | list[tuple[str, bytes]]) -> Path:
    items = members.items() if isinstance(members, dict) else members
    with tarfile.open(target, "w:gz") as tar:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return target


def craft(archive: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """`archive` with `change` applied to its members (JSON ones parsed), manifest re-signed."""
    members = members_of(archive)
    manifest = json.loads(members.pop("manifest.json"))
    parsed: dict[str, Any] = {
        name: json.loads(data) if not name.startswith("stamps/") else data
        for name, data in members.items()
    }
    change(parsed)
    files = {
        name: value if isinstance(value, bytes) else json.dumps(value).encode()
        for name, value in parsed.items()
    }
    manifest["files"] = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    return pack(target, {"manifest.json": json.dumps(manifest).encode(), **files})


def moved_elsewhere(settings, tmp_path: Path) -> None:
    """The importing installation has a VIRGO_HOME of its own (as after a move to a new host)."""
    settings.VIRGO_HOME = tmp_path / "elsewhere"


# The archive ------------------------------------------------------------------------------------


def test_the_archive_is_versioned_and_holds_stamps_byte_for_byte(tmp_path: Path) -> None:
    """V1-PR-4: persona, generations, stamps and experience layer in one versioned archive."""
    persona = two_generations(standing_persona())
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    with tarfile.open(archive) as tar:
        assert tar.getnames()[0] == "manifest.json"
        manifest = json.loads(tar.extractfile("manifest.json").read())
    members = read_archive(archive).members
    assert (manifest["format"], manifest["version"], manifest["persona"]) == (
        "virgo-persona-snapshot",
        1,
        str(persona.uuid),
    )
    for number in (1, 2):
        on_disk = stamp_path(persona.uuid, number).read_bytes()
        assert members[f"stamps/{number}/CAPABILITY-STAMP.json"] == on_disk
    [entry] = json.loads(members[EXPERIENCE])
    assert entry["target_scope"] == {"path": "memory/old.md"}
    with pytest.raises(FileExistsError):
        export_persona(persona, archive)


def test_the_archive_is_owner_only_readable_json_recording_each_generation_and_choice(
    tmp_path: Path,
) -> None:
    """V1-PR-4, VX-SEC-9: the archive and each member are owner-only; every member is JSON in
    one readable form (sorted keys, two-space indent, UTF-8 text) so two snapshots diff line by
    line; generations.json records each generation's composition, hashes and standing, and a
    reviewed learned choice travels with what it shows, its key and when it was reviewed; a
    peer's learned choices (same class, another owner) stay out."""
    persona = two_generations(standing_persona(description="Zoë's reviewer"))
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent = persona.agent
    delete_persona(persona)
    restored = import_as(archive, agent).persona
    registry.review(
        entries=list(restored.prompt_registry_entries.all()), reviewer=agent.owner, accept=True
    )
    restored = two_generations(restored)
    peer = standing_persona(persona_class=restored.persona_class)
    taught(peer, "memory/peer.md")
    again = export_persona(restored, tmp_path / "again.tar.gz")

    assert stat.S_IMODE(again.stat().st_mode) == 0o600
    with tarfile.open(again) as tar:
        assert {info.name: info.mode for info in tar} == dict.fromkeys(tar.getnames(), 0o600)
    members = members_of(again)
    for name, data in members.items():
        if not name.startswith("stamps/"):
            text = data.decode()
            assert text == json.dumps(
                json.loads(text), indent=2, sort_keys=True, ensure_ascii=False
            )
    assert "Zoë's reviewer" in members["persona.json"].decode()
    assert json.loads(members["generations.json"]) == [
        {
            "number": generation.number,
            "composition": generation.composition,
            "base_composition_hash": generation.base_composition_hash,
            "standing": generation.standing,
            "not_standing_reasons": generation.not_standing_reasons,
            "stamp_hash": generation.stamp_hash,
            "composition_hash": generation.composition_hash,
            "created_at": generation.created_at.isoformat(),
        }
        for generation in restored.generations.order_by("number")
    ]
    [entry] = restored.prompt_registry_entries.all()
    assert entry.reviewed_at is not None
    assert json.loads(members[EXPERIENCE]) == [
        {
            "stamp_hash": entry.stamp_hash,
            "handler_action": entry.handler_action,
            "target_scope": entry.target_scope,
            "operation_shape": entry.operation_shape,
            "key_digest": entry.key_digest,
            "choice": entry.choice,
            "reviewed_at": entry.reviewed_at.isoformat(),
            "created_at": entry.created_at.isoformat(),
        }
    ]
    assert json.loads(members[OVERLAY]) == []


def test_the_archive_carries_the_overlay_of_the_personas_own_class_only(tmp_path: Path) -> None:
    """V1-PR-4: the shared overlay travels for the persona's class; another class's stays."""
    persona = standing_persona()
    other_class = next(c for c in PersonaClass.values if c != persona.persona_class)
    for persona_class, path in [(persona.persona_class, "memory/own.md"), (other_class, "x.md")]:
        PromptRegistryEntry.objects.create(
            location="class-overlay",
            persona_class=persona_class,
            stamp_hash="0" * 64,
            key_digest=hashlib.sha256(path.encode()).hexdigest(),
            handler_action="workspace.write",
            target_scope={"path": path},
            operation_shape={"arguments": {"mode": "delete"}},
            choice="approve",
            review=Review.ACCEPTED,
        )
    members = members_of(export_persona(persona, tmp_path / "p.tar.gz"))
    assert [row["target_scope"] for row in json.loads(members[OVERLAY])] == [
        {"path": "memory/own.md"}
    ]


@pytest.fixture
def stamp_guard_dropped() -> Iterator[None]:
    """Drop the database's guard on stored stamps for this test's transaction (rolled back)."""
    statement = {
        "sqlite": "DROP TRIGGER stamps_capabilitystamp_no_update",
        "postgresql": "DROP TRIGGER stamps_capabilitystamp_immutable ON stamps_capabilitystamp",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(statement)
    yield


def test_a_stored_stamp_altered_in_the_database_is_not_exported(
    tmp_path: Path, stamp_guard_dropped: None
) -> None:
    """VX-SEC-8, V1-PR-4: an archive never carries a stamp whose stored bytes no longer hash
    to the row's own hash (the database's guard dropped and the bytes changed), and no archive
    is written."""
    persona = standing_persona()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE stamps_capabilitystamp SET body = %s WHERE persona_uuid = %s",
            [b"{}", persona.uuid.hex if connection.vendor == "sqlite" else persona.uuid],
        )
        assert cursor.rowcount == 1
    with pytest.raises(SnapshotError) as refused:
        export_persona(persona, tmp_path / "p.tar.gz")
    assert refused.value.messages == ["stored stamp of generation 1 is altered"]
    assert not (tmp_path / "p.tar.gz").exists()


def test_a_round_trip_makes_a_new_persona_stamped_by_the_factory(tmp_path: Path) -> None:
    """VX-SEC-1, V1-PR-4, VX-REV-1: export -> import gives the same authored persona under a
    fresh uuid, granting nothing until the owner approves the grant it brings (a proposal through
    `import`); then its generation is built by the factory on the settle path (skills, stamp,
    card); the archived stamps are history only; the learned choice waits for the owner's
    review, then applies."""
    persona = two_generations(standing_persona())
    taught(persona)
    archived = {
        s.generation_number: s.data
        for s in CapabilityStamp.objects.filter(persona_uuid=persona.uuid)
    }
    authored = services.PERSONA_FIELDS
    before = {name: getattr(persona, name) for name in authored}
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent, old_uuid = persona.agent, persona.uuid
    delete_persona(persona)

    outcome = import_as(archive, agent, approve=False)
    restored = outcome.persona
    assert restored.uuid != old_uuid
    assert (restored.generation, restored.standing, restored.verb_subset) == (1, False, [])
    assert Client().get(restored.card_path).status_code == 404
    assert not stamp_path(restored.uuid, 1).exists()
    assert (outcome.proposal.status, outcome.proposal.via) == ("pending", "import")
    with run_on_commit():
        services.proposal_approve(proposal=outcome.proposal, actor=agent.owner)
    restored.refresh_from_db()
    assert {name: getattr(restored, name) for name in authored} == before
    assert (restored.generation, restored.standing, restored.discoverable) == (2, True, False)
    assert restored.skills == persona.skills
    generation = restored.generations.get(number=2)
    assert CapabilityStamp.objects.get(generation=generation).data == stamp_bytes(
        build_stamp(**stamp_inputs(generation))
    )
    assert load_active_stamp(restored).human_owner == f"user:{agent.owner_id}"
    assert PublishedCard.objects.get(persona=restored).generation == 2

    history = outcome.snapshot_import
    assert (history.source_persona, history.imported_by) == (old_uuid, agent.owner)
    assert {s.generation_number: bytes(s.body) for s in history.archived_stamps.all()} == archived
    assert not CapabilityStamp.objects.filter(
        stamp_hash__in=[hashlib.sha256(data).hexdigest() for data in archived.values()],
        persona_uuid=restored.uuid,
    ).exists()
    own_files = stamp_path(restored.uuid, 2).parents[2].rglob("*")
    assert [path for path in own_files if path.is_file()] == [stamp_path(restored.uuid, 2)]

    [entry] = restored.prompt_registry_entries.all()
    assert (entry.review, entry.key_digest, entry.stamp_hash) == (Review.PENDING, "", "")
    assert entry.imported_with == history
    call(restored, "workspace_write", {"path": "memory/old.md", "content": "x"})
    assert call(restored, "workspace_write", DELETE)["code"] == "confirmation_required"
    [carried] = registry.carry_forward(entries=[entry], reviewer=agent.owner)
    assert carried.carried is None and "waits for review" in carried.reason
    with pytest.raises(PermissionDenied):
        registry.review(entries=[entry], reviewer=make_owner(), accept=True)
    [reviewed] = registry.review(entries=[entry], reviewer=agent.owner, accept=True)
    assert reviewed.reviewed
    entry.refresh_from_db()
    assert (entry.review, entry.reviewed_by) == (Review.ACCEPTED, agent.owner)
    assert entry.stamp_hash == load_active_stamp(restored).stamp_hash
    assert call(restored, "workspace_write", DELETE)["ok"] is True


def test_ask_first_verbs_survive_a_round_trip(tmp_path: Path) -> None:
    """VX-SEC-1, VX-SEC-13: the owner's ask-first verbs travel with the snapshot; an import that
    dropped them would widen the persona (a call that asked would run unasked)."""
    persona = standing_persona(ask_first_verbs=["workspace_write"])
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent = persona.agent
    delete_persona(persona)

    restored = import_as(archive, agent).persona
    assert restored.ask_first_verbs == ["workspace_write"]
    assert load_active_stamp(restored).tools["workspace_write"].access == "confirm"
    result = call(restored, "workspace_write", {"path": "memory/a.md", "content": "x"})
    assert result["code"] == "confirmation_required"


def test_moving_to_another_owner_stamps_for_the_new_owner(tmp_path: Path) -> None:
    """VX-SEC-1, V1-PR-3: onto another owner's agent, the stamp names the new owner, held
    operations go to them, and the learned choice applies only once they accept it; a rejected
    one never does. Only accepted choices travel on."""
    persona = standing_persona()
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    new_owner = make_owner()
    outcome = import_as(archive, make_agent(new_owner))
    restored = outcome.persona
    assert load_active_stamp(restored).human_owner == f"user:{new_owner.pk}"
    call(restored, "workspace_write", {"path": "memory/old.md", "content": "x"})
    held = call(restored, "workspace_write", DELETE)
    assert held["code"] == "confirmation_required"
    record = DecisionRecord.objects.get(correlation_id=held["correlation_id"])
    assert record.authority_user == new_owner
    assert (
        json.loads(
            read_archive(export_persona(restored, tmp_path / "r.tar.gz")).members[EXPERIENCE]
        )
        == []
    )
    [entry] = restored.prompt_registry_entries.all()
    [rejected] = registry.review(entries=[entry], reviewer=new_owner, accept=False)
    assert rejected.reviewed
    [again] = registry.review(entries=[entry], reviewer=new_owner, accept=True)
    assert not again.reviewed and "reviewed already" in again.reason
    assert call(restored, "workspace_write", DELETE)["code"] == "confirmation_required"


# The attacks of issue 11 ------------------------------------------------------------------------


def test_a_crafted_stamp_granting_tools_outside_the_verb_subset_is_never_active(
    tmp_path: Path, settings
) -> None:
    """VX-SEC-1: an archive whose stamp grants a tool outside the persona's verb subset (and
    names another owner's lead) is imported with a factory stamp holding exactly the subset."""
    persona = standing_persona()
    foreign_lead = standing_persona(persona_class="project-lead")
    generation = persona.generations.get()
    inputs = stamp_inputs(generation)
    inputs["verb_subset"] = [*inputs["verb_subset"], "trigger_webhook"]
    inputs["persona"] = dataclasses.replace(inputs["persona"], owning_lead=str(foreign_lead.uuid))
    forged = stamp_bytes(build_stamp(**inputs))
    archive = export_persona(persona, tmp_path / "p.tar.gz")

    def grant_more(members: dict[str, Any]) -> None:
        members["stamps/1/CAPABILITY-STAMP.json"] = forged
        members["generations.json"][0]["stamp_hash"] = hashlib.sha256(forged).hexdigest()

    crafted = craft(archive, tmp_path / "crafted.tar.gz", grant_more)
    agent = persona.agent
    delete_persona(persona)
    moved_elsewhere(settings, tmp_path)

    restored = import_as(crafted, agent).persona
    stamp = load_active_stamp(restored)
    assert sorted(stamp.tools) == sorted(restored.verb_subset)
    assert "trigger_webhook" not in stamp.tools
    assert (stamp.owning_lead, stamp.human_owner) == (None, f"user:{agent.owner_id}")
    assert call(restored, "trigger_webhook", {"webhook": "prod"})["code"] == "not_granted"
    [kept] = ArchivedStamp.objects.filter(snapshot_import__persona=restored)
    assert bytes(kept.body) == forged
    assert not CapabilityStamp.objects.filter(stamp_hash=kept.stamp_hash).exists()


def test_another_owners_persona_as_lead_is_refused_naming_owning_lead(tmp_path: Path) -> None:
    """VX-SEC-1: an archive naming a persona the importer does not own as its lead is refused,
    naming owning_lead, and nothing is written; the importer may name a lead of their own."""
    owner = make_owner()
    agent = make_agent(owner)
    lead = standing_persona(owner, persona_class="project-lead", agent=agent)
    deputy = standing_persona(owner, agent=agent, owning_lead=lead)
    foreign_lead = standing_persona(persona_class="project-lead")
    archive = export_persona(deputy, tmp_path / "p.tar.gz")

    def reroute(members: dict[str, Any]) -> None:
        members["persona.json"]["owning_lead"] = str(foreign_lead.uuid)

    crafted = craft(archive, tmp_path / "crafted.tar.gz", reroute)
    delete_persona(deputy)
    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(crafted, agent=agent, actor=owner)
    assert refused.value.messages == [
        f"persona.json: owning_lead: names persona {foreign_lead.uuid}, which is not one of "
        "yours; import it with one of your project leads or none"
    ]
    with pytest.raises(CommandError, match="owning_lead"):
        call_command("persona", "import", str(crafted), "--agent", str(agent.pk))
    assert written() == before

    assert import_as(archive, agent).persona.owning_lead == lead
    assert import_as(crafted, agent, owning_lead=lead).persona.owning_lead == lead
    copy = copy_address(crafted, agent)
    assert copy is not None
    with run_on_commit():
        call_command(
            "persona", "import", str(crafted), "--agent", str(agent.pk), "--lead", "none",
            "--address", copy, stdout=io.StringIO(),
        )  # fmt: skip
    imported = agent.personas.latest("pk")
    assert imported.name.startswith(deputy.name) and imported.owning_lead is None


@pytest.mark.parametrize(
    ("where", "change"),
    [
        (
            "persona.json: human_surface_bindings",
            lambda m, other: m["persona.json"].update(
                human_surface_bindings=[f"virgo:persona/{other}"]
            ),
        ),
        (
            f"{EXPERIENCE} row 1: target_scope",
            lambda m, other: m[EXPERIENCE][0].update(
                target_scope={"path": "memory/old.md", "recipient": str(other)}
            ),
        ),
        (
            f"{EXPERIENCE} row 1: operation_shape",
            lambda m, other: m[EXPERIENCE][0]["operation_shape"].update(peer=other.hex.upper()),
        ),
    ],
)
def test_any_other_reference_to_a_foreign_persona_is_refused_naming_the_field(
    tmp_path: Path, where: str, change
) -> None:
    """VX-SEC-1: a binding or learned choice naming another owner's persona is refused."""
    persona = standing_persona()
    taught(persona)
    other = standing_persona().uuid
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    crafted = craft(archive, tmp_path / "crafted.tar.gz", lambda m: change(m, other))
    delete_persona(persona)
    before = written()
    with pytest.raises(SnapshotError, match=f"{where}: names persona {other}"):
        import_persona(crafted, agent=persona.agent, actor=persona.agent.owner)
    assert written() == before


def test_a_choice_shown_as_a_write_but_keyed_to_a_delete_applies_only_as_shown(
    tmp_path: Path, settings
) -> None:
    """VX-SEC-1, V1-PR-1: a learned choice shown as "write QUEUE.md" whose key digest is that of
    "delete QUEUE.md": after import nothing applies; once the owner accepts what they see in the
    admin, each choice is keyed from its shown fields and answers only that operation."""
    persona = standing_persona()
    taught(persona)
    stamp = load_active_stamp(persona)
    tool = stamp.tools["workspace_write"]

    def op(arguments: dict[str, Any], on=stamp, binding_tool=tool):
        return normalise(
            tool="workspace_write",
            action=binding_tool.action,
            arguments=arguments,
            binding=on.binding_for(binding_tool),
        )

    write_queue = {"path": "QUEUE.md", "content": "# queue"}
    delete_queue = {"path": "QUEUE.md", "mode": "delete"}
    shown = op(write_queue)
    archive = export_persona(persona, tmp_path / "p.tar.gz")

    def disguise(members: dict[str, Any]) -> None:
        members[EXPERIENCE].append(
            {
                "stamp_hash": stamp.stamp_hash,
                "handler_action": shown.action,
                "target_scope": shown.scope_key,
                "operation_shape": shown.shape,
                "key_digest": registry.operation_digest(stamp, op(delete_queue)),
                "choice": "approve",
                "reviewed_at": None,
                "created_at": "2026-01-01T00:00:00+00:00",
            }
        )

    crafted = craft(archive, tmp_path / "crafted.tar.gz", disguise)
    agent = persona.agent
    delete_persona(persona)
    moved_elsewhere(settings, tmp_path)

    restored = import_as(crafted, agent).persona
    for arguments in (write_queue, {"path": "memory/old.md", "content": "x"}):
        assert call(restored, "workspace_write", arguments)["ok"] is True
    assert call(restored, "workspace_write", delete_queue)["code"] == "confirmation_required"
    assert call(restored, "workspace_write", DELETE)["code"] == "confirmation_required"
    entries = list(restored.prompt_registry_entries.order_by("id"))
    assert [(e.review, e.key_digest) for e in entries] == [(Review.PENDING, "")] * 2

    url = reverse("admin:runtime_promptregistryentry_changelist")
    form = {"action": "accept", "_selected_action": [e.pk for e in entries]}
    stranger = Client()
    stranger.force_login(make_owner())
    stranger.post(url, form, follow=True)
    assert not restored.prompt_registry_entries.filter(review=Review.ACCEPTED).exists()
    owner = Client()
    owner.force_login(agent.owner)
    listing = owner.get(url).content.decode()
    assert "QUEUE.md" in listing and "Waits for review" in listing
    assert owner.post(url, form, follow=True).status_code == 200

    honest, disguised = (PromptRegistryEntry.objects.get(pk=e.pk) for e in entries)
    assert (honest.review, disguised.review) == (Review.ACCEPTED, Review.ACCEPTED)
    now = load_active_stamp(restored)
    now_tool = now.tools["workspace_write"]
    assert disguised.key_digest == registry.operation_digest(
        now, op(write_queue, on=now, binding_tool=now_tool)
    )
    assert call(restored, "workspace_write", delete_queue)["code"] == "confirmation_required"
    cid = correlation()
    assert call(restored, "workspace_write", DELETE, cid)["ok"] is True
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.decided_via, record.registry_entry) == (
        DecisionRecord.Via.PROMPT_REGISTRY,
        honest,
    )


def test_class_overlay_rows_come_only_with_a_superuser_and_wait_for_a_superusers_review(
    tmp_path: Path,
) -> None:
    """VX-SEC-1, V1-PR-4: a non-superuser's import leaves the shared overlay alone; a
    superuser's brings its rows in inactive, and only a superuser's review makes them apply."""
    persona = standing_persona()
    call(persona, "workspace_write", {"path": "memory/scratch.md", "content": "x"})
    cid = correlation()
    call(persona, "workspace_write", {"path": "memory/scratch.md", "mode": "delete"}, cid)
    record = confirmations.decide(
        record=DecisionRecord.objects.get(correlation_id=cid),
        approve=True,
        user=persona.agent.owner,
    )
    registry.learn_for_class(record=record, user=make_superuser())
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    PromptRegistryEntry.objects.all().delete()

    target = make_agent(make_owner())
    with pytest.raises(
        PermissionDenied, match=r"^only the agent's owner may import a persona onto it$"
    ):
        import_persona(archive, agent=target, actor=make_owner())
    outcome = import_as(archive, target)
    assert outcome.overlay_entries == 0
    assert outcome.skipped == [
        "1 class-overlay entries (the shared overlay is imported by staff only)"
    ]
    assert not PromptRegistryEntry.objects.filter(location="class-overlay").exists()
    delete_persona(outcome.persona)

    staff = make_superuser()
    outcome = import_as(archive, make_agent(staff))
    assert (outcome.overlay_entries, outcome.skipped) == (1, [])
    peer = standing_persona()
    scratch = {"path": "memory/scratch.md", "mode": "delete"}
    call(peer, "workspace_write", {"path": "memory/scratch.md", "content": "x"})
    assert call(peer, "workspace_write", scratch)["code"] == "confirmation_required"
    [entry] = PromptRegistryEntry.objects.filter(location="class-overlay")
    assert (entry.review, entry.key_digest, entry.imported_with) == (
        Review.PENDING,
        "",
        outcome.snapshot_import,
    )
    url = reverse("admin:runtime_promptregistryentry_changelist")
    owner = Client()
    owner.force_login(peer.agent.owner)
    assert entry.pk not in [shown.pk for shown in owner.get(url).context["cl"].result_list]
    with pytest.raises(PermissionDenied):
        registry.review(entries=[entry], reviewer=peer.agent.owner, accept=True)
    [reviewed] = registry.review(entries=[entry], reviewer=staff, accept=True)
    assert reviewed.reviewed
    entry.refresh_from_db()
    assert entry.stamp_hash == load_active_stamp(outcome.persona).profile_hash
    assert call(peer, "workspace_write", scratch)["ok"] is True


def test_an_entry_waiting_for_review_is_never_keyed_and_an_answered_operation_stays_answered(
    tmp_path: Path,
) -> None:
    """VX-SEC-1: the database holds a waiting entry unkeyed (and an accepted one keyed); an
    imported choice for an operation the owner has answered since is not accepted over it."""
    persona = standing_persona()
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    restored = import_as(archive, make_agent(make_owner())).persona
    [waiting] = restored.prompt_registry_entries.all()
    for review, digest in ((Review.PENDING, "f" * 64), (Review.ACCEPTED, "")):
        with pytest.raises(IntegrityError), transaction.atomic():
            PromptRegistryEntry.objects.filter(pk=waiting.pk).update(
                review=review, key_digest=digest
            )
    answered = taught(restored)
    [outcome] = registry.review(entries=[waiting], reviewer=restored.agent.owner, accept=True)
    assert not outcome.reviewed and "already has a choice" in outcome.reason
    waiting.refresh_from_db()
    assert (waiting.review, waiting.key_digest) == (Review.PENDING, "")
    assert answered.review == Review.ACCEPTED


# Validation: every row, with an error naming the row and field; nothing written on error ---------


def _first_entry(members: dict[str, Any]) -> dict[str, Any]:
    return members[EXPERIENCE][0]


BAD_ROWS = [
    (
        "unknown action",
        lambda m: _first_entry(m).update(handler_action="workspace.nuke"),
        f"{EXPERIENCE} row 1: handler_action: unknown handler action 'workspace.nuke'",
    ),
    (
        "target not an object",
        lambda m: _first_entry(m).update(target_scope="QUEUE.md"),
        f"{EXPERIENCE} row 1: target_scope: must be a JSON object",
    ),
    (
        "target too large",
        lambda m: _first_entry(m).update(target_scope={"path": "m" * 5000}),
        f"{EXPERIENCE} row 1: target_scope: larger than 4096 bytes",
    ),
    (
        "target naming the binding",
        lambda m: _first_entry(m)["target_scope"].update(workspace="elsewhere"),
        f"{EXPERIENCE} row 1: target_scope: holds 'workspace'; a learned choice is keyed "
        "within the persona's own binding",
    ),
    (
        "shape not an object",
        lambda m: _first_entry(m).update(operation_shape=["mode"]),
        f"{EXPERIENCE} row 1: operation_shape: must be a JSON object",
    ),
    (
        "shape out of I-JSON",
        lambda m: _first_entry(m)["operation_shape"].update(mode=2**60),
        f"{EXPERIENCE} row 1: operation_shape: is not I-JSON: …",
    ),
    (
        "choice",
        lambda m: _first_entry(m).update(choice="always"),
        f"{EXPERIENCE} row 1: choice: must be one of approve, deny",
    ),
    (
        "missing choice",
        lambda m: _first_entry(m).pop("choice"),
        f"{EXPERIENCE} row 1: choice: this field is required",
    ),
    (
        "unknown field",
        lambda m: _first_entry(m).update(review="accepted"),
        f"{EXPERIENCE} row 1: review: not a field of a learned choice",
    ),
    (
        "row not an object",
        lambda m: m[EXPERIENCE].append("approve everything"),
        f"{EXPERIENCE} row 2: must be a JSON object",
    ),
    (
        "overlay row, even when not imported",
        lambda m: m[OVERLAY].append({**_first_entry(m), "choice": "yes"}),
        f"{OVERLAY} row 1: choice: must be one of approve, deny",
    ),
    (
        "persona field",
        lambda m: m["persona.json"].update(is_superuser=True),
        "persona.json: is_superuser: not a field of a persona snapshot",
    ),
    (
        "persona name",
        lambda m: m["persona.json"].update(name="n" * 500),
        "persona.json: name: longer than 120 characters",
    ),
    (
        "persona verbs",
        lambda m: m["persona.json"].update(verb_subset="everything"),
        "persona.json: verb_subset: must be a list",
    ),
    (
        "persona verbs outside the grant",
        lambda m: m["persona.json"]["verb_subset"].append("create_for"),
        "persona.json: verb_subset: not in agent …",
    ),
    (
        "generations",
        lambda m: m.update({"generations.json": {"1": "standing"}}),
        "generations.json: must be a JSON list",
    ),
    (
        "persona not an object",
        lambda m: m.update({"persona.json": ["name"]}),
        "persona.json: must be a JSON object",
    ),
    (
        "persona uuid missing",
        lambda m: m["persona.json"].pop("uuid"),
        "persona.json: uuid: this field is required",
    ),
    (
        "persona uuid",
        lambda m: m["persona.json"].update(uuid="not-a-uuid"),
        "persona.json: uuid: must be a UUID",
    ),
    (
        "persona description",
        lambda m: m["persona.json"].update(description=5),
        "persona.json: description: must be a string",
    ),
    (
        "persona address",
        lambda m: m["persona.json"].update(address="a" * 201),
        "persona.json: address: longer than 200 characters",
    ),
    (
        "persona lead",
        lambda m: m["persona.json"].update(owning_lead="not-a-uuid"),
        "persona.json: owning_lead: must be a persona uuid or null",
    ),
    (
        "generation row",
        lambda m: m["generations.json"].append("2"),
        "generations.json row 2: number: must be an integer",
    ),
    (
        "stamp without a generation",
        lambda m: m.update({"stamps/9/CAPABILITY-STAMP.json": b"{}"}),
        "stamps/9/CAPABILITY-STAMP.json: generations.json has no generation 9",
    ),
    (
        "stamp altered, manifest re-signed",
        lambda m: m.update(
            {"stamps/1/CAPABILITY-STAMP.json": m["stamps/1/CAPABILITY-STAMP.json"] + b" "}
        ),
        "the stamp of generation 1 does not match its hash",
    ),
    (
        "registry not a list",
        lambda m: m.update({EXPERIENCE: {"1": _first_entry(m)}}),
        f"{EXPERIENCE}: must be a JSON list",
    ),
    (
        "not I-JSON number",
        lambda m: m["persona.json"].update(name=float("nan")),
        "persona.json is not valid JSON: NaN is not JSON",
    ),
    (
        "two fields",
        lambda m: m["persona.json"].update(name="  ", persona_class="wizard"),
        "persona.json: name: must not be blank; persona.json: persona_class: unknown class "
        "'wizard'; one of …",
    ),
    (
        "two problems of one field",
        lambda m: m["persona.json"].update(human_surface_bindings=["a b", "c d"]),
        "persona.json: human_surface_bindings: 'a b' is not a hub binding: 1-200 printable "
        "ASCII characters, no spaces 'c d' is not a hub binding: 1-200 printable ASCII "
        "characters, no spaces",
    ),
]


@pytest.mark.parametrize(("case", "change", "message"), BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_every_row_is_validated_with_an_error_naming_the_row_and_field(
    tmp_path: Path, case: str, change, message: str
) -> None:
    """VX-SEC-1: a malformed row is refused naming its file, row and field; nothing written."""
    owner = make_owner()
    agent = make_agent(owner, granted_verbs=class_verbs("coder-deputy"))
    persona = standing_persona(owner, agent=agent)
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    crafted = craft(archive, tmp_path / "crafted.tar.gz", change)
    delete_persona(persona)
    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(crafted, agent=agent, actor=owner)
    [text] = refused.value.messages
    # A message ending in "…" is the start of one that goes on (a library's words, a list).
    assert text.startswith(message[:-1]) if message.endswith("…") else text == message
    assert written() == before


def test_a_refusal_of_the_persona_as_a_whole_is_named_the_personas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-SEC-1: a refusal that names no field (every refusal of today names one: the real
    ones are the rows above) still comes out as one line saying what was refused."""
    archive, agent = _exported(tmp_path)

    def refuse(**fields: Any) -> None:
        raise ValidationError(["not now", "try later"])

    monkeypatch.setattr(services, "persona_draft", refuse)
    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(archive, agent=agent, actor=agent.owner)
    assert refused.value.messages == ["persona: not now try later"]
    assert written() == before


def _exported(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A persona with one learned choice, exported and then deleted: (archive, its agent)."""
    persona = standing_persona()
    taught(persona)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    return archive, persona.agent


def test_optional_fields_may_be_left_out_and_a_field_may_be_as_long_as_its_column(
    tmp_path: Path,
) -> None:
    """VX-SEC-1: persona.json may leave out what a persona need not have (a description, a
    namespace, queues, bindings, ask-first verbs, a lead): the import gives each its empty
    value; a name exactly as long as the column allows is taken as it is."""
    archive, agent = _exported(tmp_path)
    name = "n" * Persona._meta.get_field("name").max_length

    def minimal(members: dict[str, Any]) -> None:
        record = members["persona.json"]
        for optional in ("description", "graph_namespace", "queues", "ask_first_verbs"):
            record.pop(optional)
        record.pop("human_surface_bindings")
        record.pop("owning_lead")
        record["name"] = name

    outcome = import_as(craft(archive, tmp_path / "minimal.tar.gz", minimal), agent)
    restored = outcome.persona
    assert (restored.name, restored.description, restored.graph_namespace) == (name, "", "")
    assert (restored.queues, restored.human_surface_bindings, restored.ask_first_verbs) == (
        [],
        [],
        [],
    )
    assert restored.owning_lead is None and outcome.skipped == []


def test_a_repeated_choice_is_kept_once_and_the_skip_is_reported(tmp_path: Path) -> None:
    """VX-SEC-1: two rows showing the same operation become one waiting choice (the later
    one), and the outcome names the row left out; the choices are the importer's."""
    archive, agent = _exported(tmp_path)

    def repeat(members: dict[str, Any]) -> None:
        members[EXPERIENCE].append({**_first_entry(members), "choice": "deny"})

    crafted = craft(archive, tmp_path / "crafted.tar.gz", repeat)
    outcome = import_as(crafted, agent)
    assert outcome.skipped == [
        f"{EXPERIENCE} row 1: the same operation as {EXPERIENCE} row 2, which is kept"
    ]
    assert (outcome.archived_stamps, outcome.experience_entries, outcome.overlay_entries) == (
        1,
        1,
        0,
    )
    manifest = members_of(crafted)["manifest.json"]
    assert outcome.snapshot_import.manifest_sha256 == hashlib.sha256(manifest).hexdigest()
    [entry] = outcome.persona.prompt_registry_entries.all()
    assert (entry.choice, entry.review, entry.created_by) == ("deny", Review.PENDING, agent.owner)


def test_a_repeated_overlay_choice_is_kept_once_and_the_skip_is_reported(tmp_path: Path) -> None:
    """VX-SEC-1, V1-PR-4: the shared overlay's rows are told apart by what they show as the
    persona's own are, and a superuser's import reports the row it left out."""
    archive, _ = _exported(tmp_path)

    def overlay_twice(members: dict[str, Any]) -> None:
        row = _first_entry(members)
        members[OVERLAY] = [row, {**row, "choice": "deny"}]

    crafted = craft(archive, tmp_path / "crafted.tar.gz", overlay_twice)
    outcome = import_as(crafted, make_agent(make_superuser()))
    assert outcome.skipped == [
        f"{OVERLAY} row 1: the same operation as {OVERLAY} row 2, which is kept"
    ]
    assert outcome.overlay_entries == 1
    assert outcome.renamed_from is None  # the superuser has no persona of the archive's name
    # The record counts every choice that now waits for the importer, the overlay's too.
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SNAPSHOT_IMPORTED, persona=outcome.persona)
    waiting = outcome.experience_entries + outcome.overlay_entries
    assert event.data["learned_choices_waiting"] == waiting
    [entry] = PromptRegistryEntry.objects.filter(location="class-overlay")
    assert (entry.choice, entry.review) == ("deny", Review.PENDING)


@pytest.mark.parametrize("member", [EXPERIENCE, OVERLAY, "persona.json", "generations.json"])
def test_a_member_that_is_not_json_is_refused_naming_it(tmp_path: Path, member: str) -> None:
    """VX-SEC-1: the refusal of a file that does not parse says which file it is."""
    archive, agent = _exported(tmp_path)
    crafted = craft(archive, tmp_path / "crafted.tar.gz", lambda m: m.update({member: b"[{"}))
    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(crafted, agent=agent, actor=agent.owner)
    [text] = refused.value.messages
    assert text.startswith(f"{member} is not valid JSON: ")
    assert written() == before


def test_the_row_and_size_limits_of_a_registry_admit_their_own_value(tmp_path: Path) -> None:
    """VX-SEC-1: a registry file may hold 10,000 rows and a target scope 4,096 bytes (as RFC
    8785 JSON); one row or one byte more is refused naming the file."""
    archive, agent = _exported(tmp_path)
    path = "memory/" + "m" * (4096 - len('{"path":"memory/"}'))

    def at_the_limits(members: dict[str, Any]) -> None:
        first = _first_entry(members)
        members[EXPERIENCE] = [first] * 9_999 + [{**first, "target_scope": {"path": path}}]

    outcome = import_as(craft(archive, tmp_path / "limits.tar.gz", at_the_limits), agent)
    entries = outcome.persona.prompt_registry_entries.order_by("id")
    assert [e.target_scope for e in entries] == [{"path": "memory/old.md"}, {"path": path}]
    assert len(outcome.skipped) == 9_998

    def one_more(members: dict[str, Any]) -> None:
        members[EXPERIENCE] = [_first_entry(members)] * 10_001

    def one_byte_more(members: dict[str, Any]) -> None:
        _first_entry(members)["target_scope"] = {"path": path + "m"}

    for change, message in (
        (one_more, f"{EXPERIENCE}: more than 10000 learned choices"),
        (one_byte_more, f"{EXPERIENCE} row 1: target_scope: larger than 4096 bytes"),
    ):
        before = written()
        with pytest.raises(SnapshotError) as refused:
            import_persona(
                craft(archive, tmp_path / "over.tar.gz", change), agent=agent, actor=agent.owner
            )
        assert refused.value.messages == [message]
        assert written() == before


def test_a_lead_the_importer_names_is_checked_as_the_importers_own_word(tmp_path: Path) -> None:
    """VX-SEC-1: a lead given to the import (not read from persona.json) that is no project
    lead is refused naming owning_lead, without blaming the archive."""
    owner = make_owner()
    agent = make_agent(owner)
    persona = standing_persona(owner, agent=agent)
    not_a_lead = standing_persona(owner, agent=agent)
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(archive, agent=agent, actor=owner, owning_lead=not_a_lead)
    assert refused.value.messages == ["owning_lead: the owning lead must be a project-lead persona"]
    assert written() == before


def test_a_foreign_persona_is_found_as_a_key_too(tmp_path: Path) -> None:
    """VX-SEC-1: a learned choice naming another owner's persona by an object key (not a
    value) is refused like any other reference; the importer's own persona may be named."""
    own = standing_persona()
    taught(own)
    other = standing_persona().uuid
    archive = export_persona(own, tmp_path / "p.tar.gz")

    def keyed(uuid_named):  # type: ignore[no-untyped-def]
        def change(members: dict[str, Any]) -> None:
            _first_entry(members)["operation_shape"][str(uuid_named)] = "peer"

        return change

    before = written()
    with pytest.raises(SnapshotError) as refused:
        import_persona(
            craft(archive, tmp_path / "foreign.tar.gz", keyed(other)),
            agent=own.agent,
            actor=own.agent.owner,
        )
    assert refused.value.messages == [
        f"{EXPERIENCE} row 1: operation_shape: names persona {other}, which is not one of yours"
    ]
    assert written() == before
    restored = import_as(craft(archive, tmp_path / "own.tar.gz", keyed(own.uuid)), own.agent)
    [entry] = restored.persona.prompt_registry_entries.all()
    assert entry.operation_shape[str(own.uuid)] == "peer"


@pytest.mark.parametrize("smaller", [500, 1000], ids=["at-500", "last-of-1001"])
def test_a_foreign_persona_among_a_thousand_names_is_still_found(
    tmp_path: Path, smaller: int
) -> None:
    """VX-SEC-1: the names an archive holds are looked up in slices of 500; a foreign persona
    hidden at the start of the second slice, or past the thousandth name, is refused too."""
    archive, agent = _exported(tmp_path)
    other = str(standing_persona().uuid)
    low = [str(uuid.UUID(int=number)) for number in range(1, smaller + 1)]
    high = [str(uuid.UUID(int=2**128 - number)) for number in range(1, 1001 - smaller)]
    assert sorted([*low, other, *high]).index(other) == smaller

    def hide(members: dict[str, Any]) -> None:
        members["persona.json"]["human_surface_bindings"] = [
            f"virgo:persona/{name}" for name in [*high, other, *low]
        ]

    before = written()
    crafted = craft(archive, tmp_path / "c.tar.gz", hide)
    with CaptureQueriesContext(connection) as queries, pytest.raises(SnapshotError) as refused:
        import_persona(crafted, agent=agent, actor=agent.owner)
    assert refused.value.messages == [
        f"persona.json: human_surface_bindings: names persona {other}, which is not one of yours"
    ]
    assert written() == before
    lookups = [q["sql"] for q in queries.captured_queries if '"uuid" IN (' in q["sql"]]
    assert len(lookups) == 3, "1,001 names are three slices: 500, 500 and 1"


# Archive limits -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "notes.txt",
        "stamps/1/extra.json",
        "stamps/01/CAPABILITY-STAMP.json",
        "experience/other.json",
        "persona.json.bak",
    ],
)
def test_only_the_known_member_names_are_read(tmp_path: Path, name: str) -> None:
    """VX-SEC-1: a member the format does not name is refused, even when its manifest lists it."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    crafted = craft(archive, tmp_path / "crafted.tar.gz", lambda m: m.update({name: b"{}"}))
    delete_persona(persona)
    before = written()
    with pytest.raises(SnapshotError, match=f"unexpected archive member '{name}'"):
        import_persona(crafted, agent=persona.agent, actor=persona.agent.owner)
    assert written() == before


def test_a_member_twice_is_refused(tmp_path: Path) -> None:
    """VX-SEC-1: a second copy of a member (the one a reader would keep) is refused."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    members = list(members_of(archive).items())
    doubled = pack(tmp_path / "doubled.tar.gz", [*members, members[1]])
    delete_persona(persona)
    with pytest.raises(SnapshotError, match=f"archive member '{members[1][0]}' appears twice"):
        import_persona(doubled, agent=persona.agent, actor=persona.agent.owner)


def test_an_archive_with_too_many_members_is_refused(tmp_path: Path) -> None:
    """VX-SEC-1: members are counted as they are read; one past the cap stops the import."""
    many = [(f"stamps/{n}/CAPABILITY-STAMP.json", b"{}") for n in range(1, MAX_MEMBERS + 2)]
    archive = pack(tmp_path / "many.tar.gz", many)
    agent = make_agent(make_owner())
    with pytest.raises(SnapshotError, match=f"more than {MAX_MEMBERS} members"):
        import_persona(archive, agent=agent, actor=agent.owner)


_ZERO_MIB = gzip.compress(bytes(MIB), compresslevel=9)


def _zeros(mebibytes: int) -> bytes:
    """gzip members that decompress to `mebibytes` MiB of zeros (concatenated gzip is gzip)."""
    return _ZERO_MIB * mebibytes


def test_an_archive_too_large_in_total_is_refused_at_the_member_that_crosses(
    tmp_path: Path,
) -> None:
    """VX-SEC-1: members each under the member cap, together over the total, are refused at the
    header of the member that crosses it, before its data is read."""
    each = MAX_MEMBER_BYTES // MIB
    stream = b""
    for number in range(1, MAX_TOTAL_BYTES // MAX_MEMBER_BYTES + 2):
        info = tarfile.TarInfo(f"stamps/{number}/CAPABILITY-STAMP.json")
        info.size = each * MIB
        stream += gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)) + _zeros(each)
    archive = tmp_path / "large.tar.gz"
    archive.write_bytes(stream + gzip.compress(bytes(2 * tarfile.BLOCKSIZE)))
    agent = make_agent(make_owner())
    with pytest.raises(SnapshotError, match=f"larger than {MAX_TOTAL_BYTES // MIB} MiB"):
        import_persona(archive, agent=agent, actor=agent.owner)


def test_a_gzip_bomb_stops_early(tmp_path: Path) -> None:
    """VX-SEC-1: an extended header claiming 256 MiB (which a tar reader buffers whole) is cut
    off once the archive's uncompressed limit is read."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = 256 * MIB
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT)) + _zeros(256))
    agent = make_agent(make_owner())
    with pytest.raises(SnapshotError, match=f"larger than {MAX_TOTAL_BYTES // MIB} MiB"):
        import_persona(archive, agent=agent, actor=agent.owner)


def _padded(archive: Path, target: Path, sizes: dict[str, int]) -> Path:
    """`archive` with JSON members padded by trailing spaces to exact sizes, manifest re-signed."""
    members = members_of(archive)
    manifest = json.loads(members.pop("manifest.json"))
    for name, size in sizes.items():
        members[name] = members[name].ljust(size)
    manifest["files"] = {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}
    return pack(target, {"manifest.json": json.dumps(manifest).encode(), **members})


def test_members_at_the_size_limits_are_read_and_one_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    """VX-SEC-1: members of exactly 16 MiB making exactly 64 MiB in all are imported; a member
    one byte larger, or one byte more in all, is refused naming the limit."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    members = members_of(archive)
    rest = MAX_TOTAL_BYTES - 3 * MAX_MEMBER_BYTES - len(members["stamps/1/CAPABILITY-STAMP.json"])
    rest -= len(json.dumps(json.loads(members["manifest.json"])))  # as _padded writes it
    full = {
        "persona.json": MAX_MEMBER_BYTES,
        "generations.json": MAX_MEMBER_BYTES,
        EXPERIENCE: MAX_MEMBER_BYTES,
        OVERLAY: rest,
    }
    outcome = import_as(_padded(archive, tmp_path / "full.tar.gz", full), persona.agent)
    assert outcome.persona.name == persona.name
    before = written()
    for sizes, message in (
        (
            {"persona.json": MAX_MEMBER_BYTES + 1},
            "archive member 'persona.json' is larger than 16 MiB",
        ),
        ({**full, OVERLAY: rest + 1}, "the archive is larger than 64 MiB uncompressed"),
    ):
        with pytest.raises(SnapshotError) as refused:
            import_persona(
                _padded(archive, tmp_path / "over.tar.gz", sizes),
                agent=persona.agent,
                actor=persona.agent.owner,
            )
        assert refused.value.messages == [message]
    assert written() == before


def test_the_member_that_crosses_the_total_is_refused_before_its_data_is_read(
    tmp_path: Path,
) -> None:
    """VX-SEC-1: members count towards the total as they come: after 64 MiB of members, the
    header of one more (whose data never arrives) is refused as too large, not read."""
    each = MAX_MEMBER_BYTES // MIB
    stream = b""
    for number in range(1, MAX_TOTAL_BYTES // MAX_MEMBER_BYTES + 1):
        info = tarfile.TarInfo(f"stamps/{number}/CAPABILITY-STAMP.json")
        info.size = each * MIB
        stream += gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)) + _zeros(each)
    crossing = tarfile.TarInfo("persona.json")
    crossing.size = 1
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(stream + gzip.compress(crossing.tobuf(format=tarfile.USTAR_FORMAT)))
    agent = make_agent(make_owner())
    with pytest.raises(SnapshotError) as refused:
        import_persona(archive, agent=agent, actor=agent.owner)
    assert refused.value.messages == ["the archive is larger than 64 MiB uncompressed"]


def test_an_archive_of_exactly_the_member_cap_is_read_to_its_end(tmp_path: Path) -> None:
    """VX-SEC-1: 2,000 members are within the cap: the archive is read whole and then refused
    for what it lacks (here its manifest), not for its count."""
    many = [(f"stamps/{n}/CAPABILITY-STAMP.json", b"{}") for n in range(1, MAX_MEMBERS + 1)]
    archive = pack(tmp_path / "many.tar.gz", many)
    agent = make_agent(make_owner())
    with pytest.raises(SnapshotError) as refused:
        import_persona(archive, agent=agent, actor=agent.owner)
    assert refused.value.messages == ["the archive has no manifest.json"]


def _rewrite(archive: Path, target: Path, change) -> Path:
    members = members_of(archive)
    change(members)
    return pack(target, members)


def _with_manifest(archive: Path, target: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    """`archive` with its manifest changed (or replaced: by the bytes `change` returns)."""
    members = members_of(archive)
    manifest = json.loads(members["manifest.json"])
    instead = change(manifest)
    members["manifest.json"] = (
        instead if isinstance(instead, bytes) else json.dumps(manifest).encode()
    )
    return pack(target, members)


MANIFEST_REFUSALS = [
    ("not json", lambda m: b"[{", "manifest.json is not valid JSON: …"),
    ("a list", lambda m: b"[]", "not a virgo-persona-snapshot archive"),
    (
        "another format",
        lambda m: m.update(format="tarball"),
        "not a virgo-persona-snapshot archive",
    ),
    (
        "a later version",
        lambda m: m.update(version=2),
        "snapshot version 2 is not supported (this Virgo reads 1)",
    ),
    ("no version", lambda m: m.pop("version"), "snapshot version None is not supported …"),
    (
        "files as a list",
        lambda m: m.update(files=sorted(m["files"])),
        "the archive's members differ from its manifest",
    ),
    (
        "a member left out",
        lambda m: m["files"].pop("persona.json"),
        "the archive's members differ from its manifest",
    ),
]


@pytest.mark.parametrize(
    ("case", "change", "message"), MANIFEST_REFUSALS, ids=[c[0] for c in MANIFEST_REFUSALS]
)
def test_a_manifest_that_does_not_describe_the_archive_is_refused_saying_how(
    tmp_path: Path, case: str, change, message: str
) -> None:
    """VX-SEC-1: the manifest is the archive's own account of itself; one that is no JSON
    object of this format and version, or lists other members than it holds, is refused."""
    archive, _ = _exported(tmp_path)
    with pytest.raises(SnapshotError) as refused:
        read_archive(_with_manifest(archive, tmp_path / "bad.tar.gz", change))
    [text] = refused.value.messages
    assert text.startswith(message[:-1]) if message.endswith("…") else text == message


def test_a_member_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    """VX-SEC-1: a link named like a member is refused before anything follows it."""
    archive = tmp_path / "link.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("persona.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(SnapshotError) as refused:
        read_archive(archive)
    assert refused.value.messages == ["archive member 'persona.json' is not a regular file"]


def test_the_decompressed_stream_may_reach_its_limit_but_not_pass_it() -> None:
    """VX-SEC-1: the bound on what an archive decompresses to admits exactly its limit."""
    exact = io.BufferedReader(_Bounded(io.BytesIO(b"x" * 10_000), 10_000))
    assert len(exact.read()) == 10_000
    over = io.BufferedReader(_Bounded(io.BytesIO(b"x" * 10_001), 10_000))
    with pytest.raises(_Oversized):
        over.read()


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

    delete_persona(persona)
    before = written()
    for name, change, message in [
        ("future", future, "not supported"),
        ("tampered", tampered, "manifest hash"),
        ("escaping", escaping, "unexpected archive member"),
    ]:
        bad = _rewrite(archive, tmp_path / f"{name}.tar.gz", change)
        with pytest.raises(SnapshotError, match=message):
            import_persona(bad, agent=agent, actor=agent.owner)
    with pytest.raises(SnapshotError, match="not a readable snapshot archive"):
        import_persona(tmp_path / "missing.tar.gz", agent=agent, actor=agent.owner)
    assert written() == before


# The command ------------------------------------------------------------------------------------


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
    out = io.StringIO()
    copy = copy_address(archive, agent)
    assert copy is not None
    with run_on_commit():
        call_command(
            "persona", "import", str(archive), "--agent", str(agent.pk), "--address", copy,
            stdout=out,
        )  # fmt: skip
    assert f"(archived as {persona.uuid})" in out.getvalue()
    assert agent.personas.count() == 2


def test_an_import_never_takes_a_name_the_owner_already_uses(tmp_path: Path) -> None:
    """VX-OPS-11: importing a copy on the owner's own installation names it "<name> 2" and says
    so, so the name still picks one persona (`launch --persona`, `explain`, `persona export`);
    `--name` chooses another, and a name already in use is refused naming the option."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent = persona.agent
    out = io.StringIO()
    with run_on_commit():
        call_command(
            "persona", "import", str(archive), "--agent", str(agent.pk),
            "--address", copy_address(archive, agent), stdout=out,
        )  # fmt: skip
    copy = agent.personas.exclude(pk=persona.pk).get()
    assert copy.name == f"{persona.name} 2"
    assert (
        f"Named {persona.name} 2: one of your personas is already called {persona.name} "
        "(rename it in the admin, or import with --name)."
    ) in out.getvalue()
    assert persona_argument(persona.name, among=ANY_PERSONA) == persona
    with pytest.raises(CommandError, match=f"--name: {persona.name} 2 is already the name"):
        call_command(
            "persona", "import", str(archive), "--agent", str(agent.pk),
            "--name", f"{persona.name} 2", "--address", copy_address(archive, agent),
        )  # fmt: skip
    with run_on_commit():
        call_command(
            "persona", "import", str(archive), "--agent", str(agent.pk), "--name", "Critic",
            "--address", copy_address(archive, agent), stdout=io.StringIO(),
        )  # fmt: skip
    assert agent.personas.filter(name="Critic").exists()
    # Only a name Virgo chose is reported as a rename: not one the owner gave, nor the archive's
    # own where it was free.
    chosen = import_persona(
        archive, agent=agent, actor=agent.owner, address=copy_address(archive, agent), name="Ed"
    )
    assert (chosen.persona.name, chosen.renamed_from) == ("Ed", None)
    third = import_persona(
        archive, agent=agent, actor=agent.owner, address=copy_address(archive, agent)
    )
    assert (third.persona.name, third.renamed_from) == (f"{persona.name} 3", persona.name)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update({"persona.json": b"{not json"}), "persona.json is not valid JSON"),
        (
            lambda m: m.update({"generations.json": b"[1,"}),
            "generations.json is not valid JSON",
        ),
        (lambda m: m.pop("persona.json"), "the archive has no persona.json"),
        (lambda m: m.update({"persona.json": b"[" * 100_000}), "persona.json nests too deeply"),
    ],
)
def test_a_bad_archive_is_one_clear_line_from_the_command(
    tmp_path: Path, change, message: str
) -> None:
    """VX-SEC-1: the command refuses with one line naming the problem, never a traceback (the
    installed command's exit status: tests/test_cli.py)."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")

    def raw(members: dict[str, Any]) -> None:
        data = {
            k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in members.items()
        }
        members.clear()
        change(data)
        members.update(data)

    crafted = craft(archive, tmp_path / "crafted.tar.gz", raw)
    delete_persona(persona)
    before = written()
    with pytest.raises(CommandError) as refused:
        call_command("persona", "import", str(crafted), "--agent", str(persona.agent.pk))
    [line] = str(refused.value).splitlines()
    assert line.startswith(message)
    assert written() == before


# The history in the admin -------------------------------------------------------------------------


def test_the_owner_reads_the_archived_stamps_in_the_admin_and_nobody_else(tmp_path: Path) -> None:
    """VX-SEC-1: an import and the stamps it archived are read-only history for its owner."""
    persona = standing_persona()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    delete_persona(persona)
    outcome = import_as(archive, persona.agent)
    record = outcome.snapshot_import
    [archived] = record.archived_stamps.all()
    url = reverse("admin:runtime_snapshotimport_change", args=[record.pk])
    owner = Client()
    owner.force_login(persona.agent.owner)
    page = owner.get(url)
    assert page.status_code == 200
    assert archived.stamp_hash in page.content.decode()
    assert 'name="_save"' not in page.content.decode()
    stranger = Client()
    stranger.force_login(make_owner())
    assert stranger.get(url).status_code in (302, 403, 404)
    assert archived.stamp_hash not in stranger.get(url, follow=True).content.decode()


def test_a_name_as_long_as_the_column_allows_is_cut_to_make_room_for_its_number(
    tmp_path: Path,
) -> None:
    """VX-OPS-11: a copy of a persona whose name fills the column is named with the end of
    that name cut, not past the column's length, so the copy is still made."""
    persona = standing_persona()
    Persona.objects.filter(pk=persona.pk).update(name="N" * NAME_LENGTH)
    persona.refresh_from_db()
    archive = export_persona(persona, tmp_path / "p.tar.gz")
    agent = persona.agent
    copy = import_persona(
        archive, agent=agent, actor=agent.owner, address=copy_address(archive, agent)
    )
    assert copy.persona.name == "N" * (NAME_LENGTH - 2) + " 2"
