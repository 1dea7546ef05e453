"""Persona snapshots: a versioned archive of a persona, its generations, stamps and experience.

Format (`virgo-persona-snapshot`, version 1): a gzipped tar holding exactly

    manifest.json                       format, version, persona uuid, sha256 of every other file
    persona.json                        what the persona is (its authored fields)
    generations.json                    every generation: composition, hashes, standing
    stamps/<n>/CAPABILITY-STAMP.json    each generation's stamp, byte for byte as stored
    experience/prompt-registry.json     the persona's learned choices (its experience layer)
    class-overlay/prompt-registry.json  the shared class overlay entries of its class

An archive is a file anyone can write, so importing one adopts nothing it claims. The persona is
created anew (a fresh uuid) through personas.services under an agent of the importer, validated
against that agent's grant like any other, and granting nothing until the owner approves the grant
it brings (a GrantProposal through `import`); its generations are stamped by the factory on the
normal settle path. The archive's stamps are kept as read-only history (ArchivedStamp), never as a
generation's stamp or file. Every learned choice is re-read from the fields it shows (never its
key digest or stamp hash) and waits, unkeyed and inactive, for review (runtime.registry.review);
class-overlay entries come in only with a superuser's import and wait for a superuser's review. A
reference to a persona the importer does not own is refused. Member names, their number and their
uncompressed size are bounded, and nothing is written unless all of it is valid.

Decision records and refusals are operational history of one installation and are not part of a
snapshot.
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

from personas import audit, services
from personas.models import Agent, AuditEvent, GrantProposal, Persona
from runtime.models import ArchivedStamp, PromptRegistryEntry, SnapshotImport
from runtime.snapshot_format import (
    ENTRY_FIELDS,
    EXPERIENCE,
    FORMAT,
    OVERLAY,
    PERSONA_FIELDS,
    VERSION,
    Entry,
    Plan,
    SnapshotError,
    plan_import,
    read_archive,
)
from stamps.models import CapabilityStamp
from virgo import auditing

Review = PromptRegistryEntry.Review


# Export ---------------------------------------------------------------------------------------


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).encode()


def _entries(queryset: Any) -> list[dict[str, Any]]:
    rows = []
    for entry in queryset.filter(review=Review.ACCEPTED).order_by("id"):
        row = {name: getattr(entry, name) for name in ENTRY_FIELDS}
        row["reviewed_at"] = entry.reviewed_at.isoformat() if entry.reviewed_at else None
        row["created_at"] = entry.created_at.isoformat()
        rows.append(row)
    return rows


def export_persona(persona: Persona, archive: Path) -> Path:
    """Write the persona's snapshot to `archive` (a new file; an existing one is not replaced).

    Learned choices travel only once accepted: one still waiting for review is not yet the
    persona's.
    """
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
    files[EXPERIENCE] = _json(
        _entries(persona.prompt_registry_entries.filter(location="experience"))
    )
    files[OVERLAY] = _json(
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


# Import ---------------------------------------------------------------------------------------


class _ArchivedLead:
    """The default of import_persona's `owning_lead`: the lead persona.json names."""


ARCHIVED_LEAD = _ArchivedLead()


@dataclass
class ImportOutcome:
    persona: Persona
    snapshot_import: SnapshotImport
    # The imported grant, held for the owner's approval: nothing of it runs until then.
    proposal: GrantProposal | None = None
    archived_stamps: int = 0
    experience_entries: int = 0
    overlay_entries: int = 0
    skipped: list[str] = field(default_factory=list)
    # The archive's name, when one of the owner's personas holds it and the import took another.
    renamed_from: str | None = None


NAME_LENGTH = Persona._meta.get_field("name").max_length or 120


def _import_name(archived: str, actor: Any, name: str | None) -> str:
    """The imported persona's name: `name` if the owner gave one, else the archive's; one the
    owner's personas do not already have, so that a name given on the command line still
    names one persona (`launch --persona`, `explain`, `persona export`)."""
    taken = set(Persona.objects.filter(agent__owner=actor).values_list("name", flat=True))
    if name is not None:
        if name in taken:
            raise SnapshotError(
                f"--name: {name} is already the name of one of your personas; choose another"
            )
        return name
    if archived not in taken:
        return archived
    number = 2
    while True:
        suffix = f" {number}"
        candidate = archived[: NAME_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


def _lead(plan: Plan, actor: Any, owning_lead: Persona | _ArchivedLead | None) -> Any:
    if not isinstance(owning_lead, _ArchivedLead):
        return owning_lead
    if plan.owning_lead is None:
        return None
    lead = Persona.objects.filter(uuid=plan.owning_lead, agent__owner=actor).first()
    if lead is None:
        raise SnapshotError(
            f"persona.json: owning_lead: names persona {plan.owning_lead}, which is not one of "
            "yours; import it with one of your project leads or none"
        )
    return lead


def _create_persona(
    plan: Plan, agent: Agent, actor: Any, lead: Persona | None, overrides: dict[str, Any]
) -> services.PersonaChange:
    """The persona, created as any channel creates one (its grant a proposal for the owner); a
    refusal of a field from persona.json names it so (an override of the importer's is not)."""
    fields = {**plan.fields, **overrides}
    try:
        return services.persona_draft(
            agent=agent, actor=actor, via=GrantProposal.Via.IMPORT, owning_lead=lead, **fields
        )
    except ValidationError as exc:
        problems = exc.message_dict if hasattr(exc, "error_dict") else {"persona": exc.messages}
        raise SnapshotError(
            "; ".join(
                f"{'persona.json: ' if name in plan.fields and name not in overrides else ''}"
                f"{name}: {' '.join(messages)}"
                for name, messages in problems.items()
            )
        ) from None


def import_persona(
    archive: Path,
    *,
    agent: Agent,
    actor: Any,
    owning_lead: Persona | _ArchivedLead | None = ARCHIVED_LEAD,
    address: str | None = None,
    name: str | None = None,
) -> ImportOutcome:
    """Create a new persona of `agent` from a snapshot, on behalf of that agent's owner.

    `owning_lead`, when given, replaces the lead the archive names (None: no lead); `address`
    the address it names (which the owner's live persona may hold: the source of a copy made on
    the same installation); `name` the name it names. Without `name`, an archived name one of
    the owner's personas holds becomes the first free "<name> 2", "<name> 3"... and the outcome
    says so (`renamed_from`). Raises SnapshotError (or PermissionDenied) with nothing written.
    """
    if not (actor.is_authenticated and agent.owner_id == actor.pk):
        raise PermissionDenied("only the agent's owner may import a persona onto it")
    read = read_archive(archive)
    plan = plan_import(read, actor)
    lead = _lead(plan, actor, owning_lead)
    with transaction.atomic(), auditing.channel(auditing.IMPORT):
        archived_name = plan.fields["name"]
        overrides = {} if address is None else {"address": address}
        chosen = _import_name(archived_name, actor, name)
        if chosen != archived_name:
            overrides["name"] = chosen
        change = _create_persona(plan, agent, actor, lead, overrides)
        persona = change.persona
        record = SnapshotImport.objects.create(
            persona=persona,
            source_persona=plan.source,
            manifest_sha256=read.manifest_sha256,
            imported_by=actor,
        )
        ArchivedStamp.objects.bulk_create(
            ArchivedStamp(
                snapshot_import=record, generation_number=number, stamp_hash=digest, body=data
            )
            for number, digest, data in plan.stamps
        )
        PromptRegistryEntry.objects.bulk_create(
            [
                *(_pending(entry, record, persona=persona) for entry in plan.experience),
                *(
                    _pending(entry, record, persona_class=persona.persona_class)
                    for entry in plan.overlay
                ),
            ]
        )
        audit.record(
            AuditEvent.Kind.SNAPSHOT_IMPORTED,
            actor=actor,
            persona=persona,
            data={
                "name": persona.name,
                "persona": str(persona.uuid),
                "source_persona": str(plan.source),
                "archived_stamps": len(plan.stamps),
                "learned_choices_waiting": len(plan.experience) + len(plan.overlay),
                "held": change.proposal is not None,
            },
        )
    return ImportOutcome(
        persona=persona,
        snapshot_import=record,
        proposal=change.proposal,
        archived_stamps=len(plan.stamps),
        experience_entries=len(plan.experience),
        overlay_entries=len(plan.overlay),
        skipped=plan.skipped,
        renamed_from=archived_name if name is None and chosen != archived_name else None,
    )


# One audited action (personas.audit): the persona's creation inside it is part of the import.
# Wrapped here rather than decorated, so that make mutation (mutmut skips decorated functions)
# still mutates it.
import_persona = audit.action(import_persona)


def _pending(
    entry: Entry,
    record: SnapshotImport,
    *,
    persona: Persona | None = None,
    persona_class: str = "",
) -> PromptRegistryEntry:
    """A learned choice as it waits for review: what it shows, keyed to no stamp yet."""
    return PromptRegistryEntry(
        location=(
            PromptRegistryEntry.Location.EXPERIENCE
            if persona is not None
            else PromptRegistryEntry.Location.CLASS_OVERLAY
        ),
        persona=persona,
        persona_class=persona_class,
        stamp_hash="",
        key_digest="",
        handler_action=entry.handler_action,
        target_scope=entry.target_scope,
        operation_shape=entry.operation_shape,
        choice=entry.choice,
        review=Review.PENDING,
        imported_with=record,
        created_by=record.imported_by,
    )
