"""The snapshot format, and reading an archive into what an import may write.

Everything here is checked before anything is written: the archive is read as a bounded stream of
known members only (runtime.snapshot describes them), checked against its manifest, and each
member parsed and validated row by row, with errors naming the member, the row and the field.
A learned choice is kept only by the fields it shows; a reference to a persona the importer does
not own is refused. The result, a Plan, is what runtime.snapshot.import_persona writes.
"""

import gzip
import hashlib
import io
import json
import re
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rfc8785
from django.core.exceptions import ValidationError

from personas.catalogue import VERBS
from personas.models import Persona, RegisteredAddress
from runtime.models import PromptRegistryEntry
from runtime.operations import IDENTITY_KEYS

FORMAT = "virgo-persona-snapshot"
VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})

MIB = 1024 * 1024
MAX_MEMBERS = 2_000
MAX_MEMBER_BYTES = 16 * MIB
MAX_TOTAL_BYTES = 64 * MIB
# What tar adds around the members' contents: a header block and up to a block of padding each,
# the end-of-archive blocks and the record padding. Reading stops past this, whatever the headers
# claim, so no gzip bomb (a huge pax or long-name header included) is ever read to its end.
_TAR_OVERHEAD = (MAX_MEMBERS + 1) * 2 * tarfile.BLOCKSIZE + 2 * tarfile.RECORDSIZE
# A learned choice's target scope and shape are each a small object (RFC 8785 bytes).
MAX_ENTRY_JSON_BYTES = 4096
MAX_REGISTRY_ROWS = 10_000

EXPERIENCE = "experience/prompt-registry.json"
OVERLAY = "class-overlay/prompt-registry.json"
REQUIRED_MEMBERS = ("persona.json", "generations.json", EXPERIENCE, OVERLAY)
_STAMP_MEMBER = re.compile(r"stamps/([1-9][0-9]{0,8})/CAPABILITY-STAMP\.json")
_MEMBER_NAMES = (
    "manifest.json, persona.json, generations.json, stamps/<n>/CAPABILITY-STAMP.json, "
    f"{EXPERIENCE} and {OVERLAY}"
)
# A uuid as text as uuid.UUID reads it: 32 hex digits, dashes anywhere between them.
_UUID = re.compile(r"(?<![0-9a-f])[0-9a-f](?:-*[0-9a-f]){31}(?![0-9a-f])", re.IGNORECASE)

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
    "ask_first_verbs",
    "generation",
    "standing",
)
# What an importer takes from persona.json (with `owning_lead`); the rest is derived here anew.
AUTHORED_STRINGS = ("name", "description", "system_prompt", "persona_class", "graph_namespace")
AUTHORED_LISTS = ("verb_subset", "queues", "human_surface_bindings", "ask_first_verbs")
_PERSONA_KEYS = frozenset({*PERSONA_FIELDS, "uuid", "address", "owning_lead"})
_PERSONA_REQUIRED = ("uuid", "name", "system_prompt", "persona_class", "address", "verb_subset")

ENTRY_FIELDS = (
    "stamp_hash",
    "handler_action",
    "target_scope",
    "operation_shape",
    "key_digest",
    "choice",
)
# What an importer takes from a learned choice: what it shows. The rest is the exporter's word.
SHOWN_FIELDS = ("handler_action", "target_scope", "operation_shape", "choice")
_ENTRY_KEYS = frozenset({*ENTRY_FIELDS, "reviewed_at", "created_at"})
_HANDLER_ACTIONS = frozenset(verb.handler_action for verb in VERBS)


class SnapshotError(ValidationError):
    """The archive cannot be read or restored; nothing was written."""


# Reading --------------------------------------------------------------------------------------


class _Oversized(Exception):
    pass


class _Bounded(io.RawIOBase):
    """The decompressed stream, refusing to yield more than `limit` bytes in all."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream, self._left = stream, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        count = self._stream.readinto(view[: self._left + 1])
        self._left -= count
        if self._left < 0:
            raise _Oversized
        return count


@dataclass(frozen=True)
class Archive:
    members: dict[str, bytes]
    manifest_sha256: str


def _check_member(info: tarfile.TarInfo, members: dict[str, bytes], total: int) -> None:
    name = info.name
    if (
        name != "manifest.json"
        and name not in REQUIRED_MEMBERS
        and not _STAMP_MEMBER.fullmatch(name)
    ):
        raise SnapshotError(f"unexpected archive member {name!r}: a snapshot holds {_MEMBER_NAMES}")
    if not info.isfile():
        raise SnapshotError(f"archive member {name!r} is not a regular file")
    if name in members:
        raise SnapshotError(f"archive member {name!r} appears twice")
    if info.size > MAX_MEMBER_BYTES:
        raise SnapshotError(f"archive member {name!r} is larger than {MAX_MEMBER_BYTES // MIB} MiB")
    if total + info.size > MAX_TOTAL_BYTES:
        raise SnapshotError(f"the archive is larger than {MAX_TOTAL_BYTES // MIB} MiB uncompressed")


def read_archive(archive: Path) -> Archive:
    """Every member of a snapshot, checked against its manifest. Raises SnapshotError.

    The archive is read as a stream and stops at the first member past a limit (name, count,
    size), before that member's data is decompressed.
    """
    members: dict[str, bytes] = {}
    total = 0
    try:
        with (
            open(archive, "rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as unzipped,
            io.BufferedReader(_Bounded(unzipped, MAX_TOTAL_BYTES + _TAR_OVERHEAD)) as bounded,
            tarfile.open(fileobj=bounded, mode="r|") as tar,
        ):
            for count, info in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise SnapshotError(f"the archive has more than {MAX_MEMBERS} members")
                _check_member(info, members, total)
                handle = tar.extractfile(info)
                assert handle is not None
                members[info.name] = handle.read()
                total += info.size
    except _Oversized:
        raise SnapshotError(
            f"the archive is larger than {MAX_TOTAL_BYTES // MIB} MiB uncompressed"
        ) from None
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise SnapshotError(f"not a readable snapshot archive: {exc}") from None
    if "manifest.json" not in members:
        raise SnapshotError("the archive has no manifest.json")
    manifest_bytes = members.pop("manifest.json")
    manifest = _load_json("manifest.json", manifest_bytes)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise SnapshotError(f"not a {FORMAT} archive")
    if manifest.get("version") not in SUPPORTED_VERSIONS:
        raise SnapshotError(
            f"snapshot version {manifest.get('version')!r} is not supported "
            f"(this Virgo reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))})"
        )
    listed = manifest.get("files")
    if not isinstance(listed, dict) or set(listed) != set(members):
        raise SnapshotError("the archive's members differ from its manifest")
    for name, data in members.items():
        if hashlib.sha256(data).hexdigest() != listed[name]:
            raise SnapshotError(f"{name} does not match its manifest hash")
    for name in REQUIRED_MEMBERS:
        if name not in members:
            raise SnapshotError(f"the archive has no {name}")
    return Archive(
        members=members,
        manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_json(name: str, data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise SnapshotError(f"{name} is not valid JSON: {exc}") from None
    except RecursionError:
        raise SnapshotError(f"{name} nests too deeply") from None


# Validation: everything an import would write, checked before anything is ------------------


@dataclass(frozen=True)
class Entry:
    where: str
    handler_action: str
    target_scope: dict[str, Any]
    operation_shape: dict[str, Any]
    choice: str


@dataclass
class Plan:
    source: uuid.UUID
    fields: dict[str, Any]
    owning_lead: str | None
    stamps: list[tuple[int, str, bytes]]
    experience: list[Entry]
    overlay: list[Entry]
    skipped: list[str] = field(default_factory=list)


def _persona_fields(record: Any) -> tuple[uuid.UUID, dict[str, Any], str | None]:
    """The authored fields persona.json gives, typed and bounded, for personas.services."""

    def refuse(name: str, reason: str) -> SnapshotError:
        return SnapshotError(f"persona.json: {name}: {reason}")

    if not isinstance(record, dict):
        raise SnapshotError("persona.json: must be a JSON object")
    unknown = sorted(set(record) - _PERSONA_KEYS)
    if unknown:
        raise refuse(unknown[0], "not a field of a persona snapshot")
    for name in _PERSONA_REQUIRED:
        if name not in record:
            raise refuse(name, "this field is required")
    try:
        source = uuid.UUID(record["uuid"])
    except (TypeError, ValueError, AttributeError):
        raise refuse("uuid", "must be a UUID") from None
    fields: dict[str, Any] = {}
    for name in (*AUTHORED_STRINGS, "address"):
        value = record.get(name, "")
        if not isinstance(value, str):
            raise refuse(name, "must be a string")
        model_field = (
            RegisteredAddress._meta.get_field("path")
            if name == "address"
            else Persona._meta.get_field(name)
        )
        limit = model_field.max_length
        if limit is not None and len(value) > limit:
            raise refuse(name, f"longer than {limit} characters")
        fields[name] = value
    for name in AUTHORED_LISTS:
        value = record.get(name, [])
        if not isinstance(value, list):
            raise refuse(name, "must be a list")
        fields[name] = value
    lead = record.get("owning_lead")
    if lead is not None and not (isinstance(lead, str) and _UUID.fullmatch(lead)):
        raise refuse("owning_lead", "must be a persona uuid or null")
    return source, fields, lead


def _json_object(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SnapshotError(f"{where}: must be a JSON object")
    try:
        size = len(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, RecursionError) as exc:
        raise SnapshotError(f"{where}: is not I-JSON: {exc}") from None
    if size > MAX_ENTRY_JSON_BYTES:
        raise SnapshotError(f"{where}: larger than {MAX_ENTRY_JSON_BYTES} bytes")
    return value


def _registry_entries(member: str, rows: Any, skipped: list[str]) -> list[Entry]:
    """The learned choices of one registry file by what they show; of a repeat the last is kept."""
    if not isinstance(rows, list):
        raise SnapshotError(f"{member}: must be a JSON list")
    if len(rows) > MAX_REGISTRY_ROWS:
        raise SnapshotError(f"{member}: more than {MAX_REGISTRY_ROWS} learned choices")
    kept: dict[bytes, Entry] = {}
    for number, row in enumerate(rows, start=1):
        where = f"{member} row {number}"
        if not isinstance(row, dict):
            raise SnapshotError(f"{where}: must be a JSON object")
        unknown = sorted(set(row) - _ENTRY_KEYS)
        if unknown:
            raise SnapshotError(f"{where}: {unknown[0]}: not a field of a learned choice")
        for name in SHOWN_FIELDS:
            if name not in row:
                raise SnapshotError(f"{where}: {name}: this field is required")
        action = row["handler_action"]
        if not isinstance(action, str) or action not in _HANDLER_ACTIONS:
            raise SnapshotError(f"{where}: handler_action: unknown handler action {action!r}")
        target = _json_object(f"{where}: target_scope", row["target_scope"])
        identity = sorted(set(target) & set(IDENTITY_KEYS))
        if identity:
            raise SnapshotError(
                f"{where}: target_scope: holds {identity[0]!r}; a learned choice is keyed "
                "within the persona's own binding"
            )
        shape = _json_object(f"{where}: operation_shape", row["operation_shape"])
        choice = row["choice"]
        if choice not in PromptRegistryEntry.Choice.values:
            raise SnapshotError(
                f"{where}: choice: must be one of {', '.join(PromptRegistryEntry.Choice.values)}"
            )
        key = rfc8785.dumps([action, target, shape])
        if key in kept:
            skipped.append(f"{kept[key].where}: the same operation as {where}, which is kept")
        kept[key] = Entry(where, action, target, shape, choice)
    return list(kept.values())


def _archived_stamps(members: dict[str, bytes]) -> list[tuple[int, str, bytes]]:
    generations = _load_json("generations.json", members["generations.json"])
    if not isinstance(generations, list):
        raise SnapshotError("generations.json: must be a JSON list")
    recorded: dict[int, Any] = {}
    for number, row in enumerate(generations, start=1):
        if not isinstance(row, dict) or type(row.get("number")) is not int:
            raise SnapshotError(f"generations.json row {number}: number: must be an integer")
        recorded[row["number"]] = row.get("stamp_hash")
    stamps = []
    for name, data in sorted(members.items()):
        matched = _STAMP_MEMBER.fullmatch(name)
        if matched is None:
            continue
        number = int(matched.group(1))
        digest = hashlib.sha256(data).hexdigest()
        if number not in recorded:
            raise SnapshotError(f"{name}: generations.json has no generation {number}")
        if digest != recorded[number]:
            raise SnapshotError(f"the stamp of generation {number} does not match its hash")
        stamps.append((number, digest, data))
    return sorted(stamps)


def _persona_references(plan: Plan) -> list[tuple[str, set[str]]]:
    """Where the archive may name a persona, and the uuids each place holds."""
    places = [("persona.json: human_surface_bindings", plan.fields["human_surface_bindings"])]
    for entry in (*plan.experience, *plan.overlay):
        places.append((f"{entry.where}: target_scope", entry.target_scope))
        places.append((f"{entry.where}: operation_shape", entry.operation_shape))
    return [(where, set(_uuids_in(value))) for where, value in places]


def _uuids_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [str(uuid.UUID(found.group())) for found in _UUID.finditer(value)]
    if isinstance(value, dict):
        return [u for key, item in value.items() for u in (*_uuids_in(key), *_uuids_in(item))]
    if isinstance(value, list):
        return [u for item in value for u in _uuids_in(item)]
    return []


def _refuse_foreign_references(plan: Plan, actor: Any) -> None:
    """A persona the archive names must be one of the importer's (or not exist here at all)."""
    places = _persona_references(plan)
    named = sorted(set().union(*(uuids for _, uuids in places)))
    foreign: set[str] = set()
    # In slices: one IN list per query stays far below every database's parameter limit.
    for start in range(0, len(named), 500):
        foreign.update(
            str(value)
            for value in Persona.objects.filter(uuid__in=named[start : start + 500])
            .exclude(agent__owner=actor)
            .values_list("uuid", flat=True)
        )
    for where, uuids in places:
        others = sorted(uuids & foreign)
        if others:
            raise SnapshotError(f"{where}: names persona {others[0]}, which is not one of yours")


def plan_import(archive: Archive, actor: Any) -> Plan:
    """What importing `archive` on behalf of `actor` would write, every part of it validated."""
    members = archive.members
    source, fields, lead = _persona_fields(_load_json("persona.json", members["persona.json"]))
    skipped: list[str] = []
    plan = Plan(
        source=source,
        fields=fields,
        owning_lead=lead,
        stamps=_archived_stamps(members),
        experience=_registry_entries(
            EXPERIENCE, _load_json(EXPERIENCE, members[EXPERIENCE]), skipped
        ),
        overlay=_registry_entries(OVERLAY, _load_json(OVERLAY, members[OVERLAY]), skipped),
        skipped=skipped,
    )
    if plan.overlay and not getattr(actor, "is_superuser", False):
        plan.skipped.append(
            f"{len(plan.overlay)} class-overlay entries (the shared overlay is imported by "
            "staff only)"
        )
        plan.overlay = []
    _refuse_foreign_references(plan, actor)
    return plan
