"""Persona snapshots: a versioned archive of a persona, its generations, stamps and experience.

Format (`virgo-persona-snapshot`, version 1): a gzipped tar holding

    manifest.json                       format, version, persona uuid, sha256 of every other file
    persona.json                        what the persona is (its authored fields)
    generations.json                    every generation: composition, hashes, standing
    stamps/<n>/CAPABILITY-STAMP.json    each generation's stamp, byte for byte as stored
    experience/prompt-registry.json     the persona's learned choices (its experience layer)
    class-overlay/prompt-registry.json  the shared class overlay entries of its class

Importing restores all of it under a target agent of the importer, stamps unchanged (rows and
owner-private files), then settles the persona like any other change: if it is no longer what its
last generation says (another agent, another owner), a new generation and stamp follow, and its
learned choices wait for the owner's review before they apply to that new stamp. The persona comes
back not discoverable: listing it is again its owner's explicit choice. Class-overlay entries bind
every owner of the class, so they are imported only by staff. Decision records and refusals are
operational history of one installation and are not part of a snapshot.
"""

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.dateparse import parse_datetime

from personas import tasks
from personas.models import Agent, Generation, Persona
from personas.services import resolve_address, validate_scope
from runtime.models import PromptRegistryEntry
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path, write_stamp_file

FORMAT = "virgo-persona-snapshot"
VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 10_000

PERSONA_FIELDS = (
    "name",
    "description",
    "system_prompt",
    "verb_subset",
    "queues",
    "skills",
    "persona_class",
    "graph_namespace",
    "human_surface_bindings",
    "generation",
    "standing",
)
ENTRY_FIELDS = (
    "stamp_hash",
    "handler_action",
    "target_scope",
    "operation_shape",
    "key_digest",
    "choice",
)


class SnapshotError(ValidationError):
    """The archive cannot be read or restored; nothing was written."""


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).encode()


def _entries(queryset: Any) -> list[dict[str, Any]]:
    rows = []
    for entry in queryset.order_by("id"):
        row = {name: getattr(entry, name) for name in ENTRY_FIELDS}
        row["reviewed_at"] = entry.reviewed_at.isoformat() if entry.reviewed_at else None
        row["created_at"] = entry.created_at.isoformat()
        rows.append(row)
    return rows


def export_persona(persona: Persona, archive: Path) -> Path:
    """Write the persona's snapshot to `archive` (a new file; an existing one is not replaced)."""
    files: dict[str, bytes] = {}
    record = {name: getattr(persona, name) for name in PERSONA_FIELDS}
    record.update(
        uuid=str(persona.uuid),
        address=persona.address.path,
        owning_lead=str(persona.owning_lead.uuid) if persona.owning_lead else None,
    )
    files["persona.json"] = _json(record)
    generations = []
    for generation in persona.generations.order_by("number"):
        generations.append(
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
        )
        stored = CapabilityStamp.objects.filter(generation=generation).first()
        if stored is not None:
            if hashlib.sha256(stored.data).hexdigest() != stored.stamp_hash:
                raise SnapshotError(f"stored stamp of generation {generation.number} is altered")
            files[f"stamps/{generation.number}/CAPABILITY-STAMP.json"] = stored.data
    files["generations.json"] = _json(generations)
    files["experience/prompt-registry.json"] = _json(
        _entries(persona.prompt_registry_entries.filter(location="experience"))
    )
    files["class-overlay/prompt-registry.json"] = _json(
        _entries(
            PromptRegistryEntry.objects.filter(
                location="class-overlay", persona_class=persona.persona_class
            )
        )
    )
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "persona": str(persona.uuid),
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())},
    }
    # Owner-only whatever the umask: the archive holds the persona's prompts and stamps.
    fd = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in [("manifest.json", _json(manifest)), *sorted(files.items())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(data))
    return archive


def read_archive(archive: Path) -> dict[str, bytes]:
    """Every member of a snapshot, checked against its manifest. Raises SnapshotError."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for count, info in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise SnapshotError("the archive has too many members")
                if not info.isfile() or info.name.startswith("/") or ".." in info.name.split("/"):
                    raise SnapshotError(f"unexpected archive member {info.name!r}")
                if info.size > MAX_MEMBER_BYTES:
                    raise SnapshotError(f"archive member {info.name!r} is too large")
                handle = tar.extractfile(info)
                assert handle is not None
                members[info.name] = handle.read()
    except (OSError, tarfile.TarError) as exc:
        raise SnapshotError(f"not a readable snapshot archive: {exc}") from None
    try:
        manifest = json.loads(members.pop("manifest.json"))
    except (KeyError, ValueError):
        raise SnapshotError("the archive has no readable manifest.json") from None
    if manifest.get("format") != FORMAT:
        raise SnapshotError(f"not a {FORMAT} archive")
    if manifest.get("version") not in SUPPORTED_VERSIONS:
        raise SnapshotError(
            f"snapshot version {manifest.get('version')!r} is not supported "
            f"(this Virgo reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))})"
        )
    listed = manifest.get("files") or {}
    if set(listed) != set(members):
        raise SnapshotError("the archive's members differ from its manifest")
    for name, data in members.items():
        if hashlib.sha256(data).hexdigest() != listed[name]:
            raise SnapshotError(f"{name} does not match its manifest hash")
    return members


@dataclass
class ImportOutcome:
    persona: Persona
    generations: int = 0
    stamps: int = 0
    experience_entries: int = 0
    overlay_entries: int = 0
    skipped: list[str] = field(default_factory=list)


def import_persona(archive: Path, *, agent: Agent, actor: Any) -> ImportOutcome:
    """Restore a snapshot as a persona of `agent`, on behalf of that agent's owner."""
    if not (actor.is_authenticated and agent.owner_id == actor.pk):
        raise PermissionDenied("only the agent's owner may import a persona onto it")
    members = read_archive(archive)
    record = json.loads(members["persona.json"])
    generations = json.loads(members["generations.json"])
    if Persona.objects.filter(uuid=record["uuid"]).exists():
        raise SnapshotError(f"persona {record['uuid']} already exists here")
    validate_scope(agent, record["verb_subset"], record["queues"])
    address = resolve_address(record["address"])
    lead = None
    if record["owning_lead"]:
        lead = Persona.objects.filter(uuid=record["owning_lead"], agent__owner=agent.owner).first()
    with transaction.atomic():
        persona = Persona.objects.create(
            uuid=record["uuid"],
            agent=agent,
            address=address,
            owning_lead=lead,
            discoverable=False,
            **{name: record[name] for name in PERSONA_FIELDS},
        )
        outcome = ImportOutcome(persona)
        if record["owning_lead"] and lead is None:
            outcome.skipped.append(f"owning lead {record['owning_lead']} is not here")
        for row in generations:
            _restore_generation(persona, row, members, outcome)
        _restore_entries(persona, members, actor, outcome)
        persona_pk = persona.pk
        transaction.on_commit(lambda: tasks.settle_persona.delay(persona_pk))
    return outcome


def _restore_generation(
    persona: Persona, row: dict[str, Any], members: dict[str, bytes], outcome: ImportOutcome
) -> None:
    generation = Generation.objects.create(
        persona=persona,
        number=row["number"],
        composition=row["composition"],
        base_composition_hash=row["base_composition_hash"],
        standing=row["standing"],
        not_standing_reasons=row["not_standing_reasons"],
        stamp_hash=row["stamp_hash"],
        composition_hash=row["composition_hash"],
    )
    Generation.objects.filter(pk=generation.pk).update(created_at=parse_datetime(row["created_at"]))
    outcome.generations += 1
    data = members.get(f"stamps/{row['number']}/CAPABILITY-STAMP.json")
    if data is None:
        return
    digest = hashlib.sha256(data).hexdigest()
    if digest != row["stamp_hash"]:
        raise SnapshotError(f"the stamp of generation {row['number']} does not match its hash")
    CapabilityStamp.objects.create(
        generation=generation,
        persona_uuid=persona.uuid,
        generation_number=generation.number,
        schema_version=json.loads(data).get("schema_version", 3),
        stamp_hash=digest,
        body=data,
    )
    write_stamp_file(stamp_path(persona.uuid, generation.number), data)
    outcome.stamps += 1


def _restore_entries(
    persona: Persona, members: dict[str, bytes], actor: Any, outcome: ImportOutcome
) -> None:
    for row in json.loads(members["experience/prompt-registry.json"]):
        PromptRegistryEntry.objects.create(
            location=PromptRegistryEntry.Location.EXPERIENCE,
            persona=persona,
            reviewed_at=parse_datetime(row["reviewed_at"]) if row["reviewed_at"] else None,
            **{name: row[name] for name in ENTRY_FIELDS},
        )
        outcome.experience_entries += 1
    overlay = json.loads(members["class-overlay/prompt-registry.json"])
    if overlay and not getattr(actor, "is_superuser", False):
        outcome.skipped.append(
            f"{len(overlay)} class-overlay entries (the shared overlay is imported by staff only)"
        )
        return
    for row in overlay:
        _, created = PromptRegistryEntry.objects.get_or_create(
            location=PromptRegistryEntry.Location.CLASS_OVERLAY,
            persona_class=persona.persona_class,
            key_digest=row["key_digest"],
            defaults={name: row[name] for name in ENTRY_FIELDS if name != "key_digest"},
        )
        outcome.overlay_entries += int(created)
