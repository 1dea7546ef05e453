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

from django.core.checks import CheckMessage, Error

from personas.models import Generation
from stamps.models import CapabilityStamp, StampNotVerifiable, stored_stamp_of
from stamps.problems import Code
from stamps.projections import name_the_same_tools, projections_of
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.storage import FILE_MODE, stamp_path
from stamps.validation import schema_problems, semantic_problems
from virgo.canonical import MalformedStamp, parse_strict, sha256_hex

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


def stamp_file_messages(
    generation: Generation, *, registry: HandlerRegistry = HANDLERS
) -> list[CheckMessage]:
    """Everything wrong with the generation's stamp file, each naming the persona and the file."""
    persona = generation.persona
    label = who(generation)
    messages: list[CheckMessage] = []
    path = stamp_path(persona.uuid, generation.number)
    stored: CapabilityStamp | None = getattr(generation, "stamp", None)
    try:
        stored_stamp_of(generation)
    except StampNotVerifiable as exc:
        code = "virgo.E008" if stored is None else "virgo.E010"
        messages.append(Error(f"{label}: {exc}", obj=persona, id=code))
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode & 0o777
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
    for problem in semantic_problems(document, registry=registry):
        messages.append(
            Error(
                f"{label}: {problem.message}",
                obj=persona,
                id=_CODE_IDS.get(problem.code, "virgo.E007"),
            )
        )
    if not name_the_same_tools(projections_of(document)):
        messages.append(
            Error(
                f"{label}: the MCP tool list, handler table and launcher allowlist do not name "
                "the same tools",
                obj=persona,
                id="virgo.E005",
            )
        )
    return messages
