"""Verifying one generation's stamp file against its stored stamp: what is wrong with it, if any.

Read-only: this module says what is wrong and never changes anything. What follows from a finding
(a lost file rewritten, a broken one quarantined) is stamps.quarantine's; `virgo check`, the
periodic sweep and the runtime's load all come to it with these messages.

    virgo.E001  stamp file missing              virgo.E006  handler action not registered
    virgo.E002  stamp file altered (hash)       virgo.E007  class, boundary or scope violation
    virgo.E003  stamp file malformed            virgo.E008  standing but no stored stamp
    virgo.E004  duplicate tool names/actions    virgo.E009  stamp file not owner-private
    virgo.E005  projection would lose a tool    virgo.E010  recorded hash is not the stored stamp's
                                                virgo.E013  stamp file cannot be read (OS error)

A file is verified against its generation's stored stamp (the immutable row), never against a
column beside it (stamps.models.stored_stamp_of).
"""

import os

from django.core.checks import CheckMessage, Error

from personas.models import Generation
from stamps.models import CapabilityStamp, StampNotVerifiable, stored_stamp_of
from stamps.problems import Code
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.storage import FILE_MODE, stamp_path
from stamps.validation import Verdicts, schema_problems, schema_valid
from virgo.canonical import MalformedStamp, parse_stored, parse_strict, sha256_hex

MISSING = "virgo.E001"
NOT_PRIVATE = "virgo.E009"
UNREADABLE = "virgo.E013"

_CODE_IDS = {
    Code.DUPLICATE_NAME: "virgo.E004",
    Code.DUPLICATE_ACTION: "virgo.E004",
    Code.PROJECTION_LOSS: "virgo.E005",
    Code.UNREGISTERED_HANDLER: "virgo.E006",
}


def who(generation: Generation) -> str:
    persona = generation.persona
    return f"persona {persona.name!r} ({persona.uuid}) generation {generation.number}"


def file_is_intact(generation: Generation) -> bool:
    """The cheap test the sweep makes of every standing stamp: its file holds exactly the stored
    bytes, owner-private. Those bytes were validated before they were first written, so only a
    file that fails this is verified in full (stamp_file_messages)."""
    stored: CapabilityStamp | None = getattr(generation, "stamp", None)
    if stored is None:
        return False
    path = stamp_path(generation.persona.uuid, generation.number)
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode & 0o777
    except OSError:
        return False
    return not mode & ~FILE_MODE and sha256_hex(data) == stored.stamp_hash == generation.stamp_hash


def file_verifies(
    *,
    persona_uuid: object,
    number: int,
    stamp_hash: str,
    stored: tuple[object, int, str] | None,
    verdicts: Verdicts,
) -> bool:
    """Whether the stamp file verifies in full with nothing to say: exactly when
    stamp_file_messages finds nothing, asked of plain column values (the generation's persona
    uuid, number and recorded hash; its stored stamp's persona uuid, generation number and hash).

    `virgo check` asks this of every file, so most cost no model objects; stamp_file_messages
    asks it first too, so a file this passes is one the full verification passes.
    """
    if stored is None:
        return False
    stored_uuid, stored_number, stored_hash = stored
    if (str(stored_uuid), stored_number) != (str(persona_uuid), number):
        return False
    if stamp_hash != stored_hash:
        return False
    try:
        with open(stamp_path(persona_uuid, number), "rb") as file:
            data = file.read()
            mode = os.fstat(file.fileno()).st_mode & 0o777
    except OSError:
        return False
    if mode & ~FILE_MODE or sha256_hex(data) != stored_hash:
        return False
    try:
        document = parse_stored(data)
    except MalformedStamp:
        return False
    if not schema_valid(document):
        return False
    problems, same_tools = verdicts.of(document)
    return not problems and same_tools


def stamp_file_messages(
    generation: Generation,
    *,
    registry: HandlerRegistry = HANDLERS,
    verdicts: Verdicts | None = None,
) -> list[CheckMessage]:
    """Everything wrong with the generation's stamp file, each naming the persona and the file.

    `verdicts` (with its own registry) lets a caller verifying many files share the rules'
    verdicts between them (`virgo check`); without it they are worked out for this file alone.
    """
    persona = generation.persona
    stored: CapabilityStamp | None = getattr(generation, "stamp", None)
    verdicts = verdicts or Verdicts(registry=registry)
    if file_verifies(
        persona_uuid=persona.uuid,
        number=generation.number,
        stamp_hash=generation.stamp_hash,
        stored=None
        if stored is None
        else (stored.persona_uuid, stored.generation_number, stored.stamp_hash),
        verdicts=verdicts,
    ):
        return []
    label = who(generation)
    messages: list[CheckMessage] = []
    path = stamp_path(persona.uuid, generation.number)
    try:
        stored_stamp_of(generation)
    except StampNotVerifiable as exc:
        code = "virgo.E008" if stored is None else "virgo.E010"
        messages.append(Error(f"{label}: {exc}", obj=persona, id=code))
    try:
        # One open: the mode is read from the file just read, not looked up again by path.
        with open(path, "rb") as file:
            data = file.read()
            mode = os.fstat(file.fileno()).st_mode & 0o777
    except FileNotFoundError:
        return [*messages, Error(f"{label}: stamp file {path} is missing", obj=persona, id=MISSING)]
    except OSError as exc:
        return [
            *messages,
            Error(
                f"{label}: stamp file {path} cannot be read: {exc.strerror}",
                obj=persona,
                id=UNREADABLE,
            ),
        ]
    if stored is None:
        # Nothing the file could be verified against.
        return messages
    if mode & ~FILE_MODE:
        messages.append(
            Error(
                f"{label}: stamp file {path} is not owner-private (mode {mode:o}, not 600)",
                obj=persona,
                id=NOT_PRIVATE,
            )
        )
    actual = sha256_hex(data)
    if actual != stored.stamp_hash:
        messages.append(
            Error(
                f"{label}: stamp file {path} was altered (sha256 {actual}, stored "
                f"{stored.stamp_hash})",
                obj=persona,
                id="virgo.E002",
            )
        )
    try:
        document = parse_strict(data)
    except MalformedStamp as exc:
        return [
            *messages,
            Error(f"{label}: stamp file {path} is malformed: {exc}", obj=persona, id="virgo.E003"),
        ]
    problems = schema_problems(document)
    if problems:
        return messages + [
            Error(f"{label}: stamp file {path}: {p.message}", obj=persona, id="virgo.E003")
            for p in problems
        ]
    problems, same_tools = verdicts.of(document)
    for problem in problems:
        messages.append(
            Error(
                f"{label}: {problem.message}",
                obj=persona,
                id=_CODE_IDS.get(problem.code, "virgo.E007"),
            )
        )
    if not same_tools:
        messages.append(
            Error(
                f"{label}: the MCP tool list, handler table and launcher allowlist do not name "
                "the same tools",
                obj=persona,
                id="virgo.E005",
            )
        )
    return messages
