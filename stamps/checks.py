"""Boot validation of every active stamp (V1-BOOT-1, V1-FAC-7), as Django system checks.

Run by `manage.py check` / `virgo check`, by runserver and migrate (which run the checks before
they start), and by every Celery worker before it takes a task. An active generation whose stamp
file is missing, altered, malformed, has duplicates, cannot be projected without loss, names an
unregistered handler or lacks a tool its class requires is an error naming the persona and the
tool. A generation whose stamp is still owed, or that was recorded as not standing, is a warning:
it is not advertised, so nothing would run on it.

    virgo.E001  stamp file missing              virgo.E006  handler action not registered
    virgo.E002  stamp file altered (hash)       virgo.E007  class, boundary or scope violation
    virgo.E003  stamp file malformed            virgo.E008  standing but no stored stamp
    virgo.E004  duplicate tool names/actions    virgo.E009  stamp file not owner-private
    virgo.E005  projection would lose a tool    virgo.E010  recorded hash is not the stored stamp's
                                                virgo.W001  stamp owed (build pending)
                                                virgo.W002  generation does not stand

A file is verified against its generation's stored stamp (the immutable row), never against a
column beside it (stamps.models.stored_stamp_of).
"""

import logging
import sys
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.core.management.base import SystemCheckError
from django.db import DatabaseError
from django.db.models import F

from personas.models import Generation
from stamps.canonical import MalformedStamp, parse_strict, sha256_hex
from stamps.models import CapabilityStamp, StampNotVerifiable, stored_stamp_of
from stamps.projections import name_the_same_tools, projections_of
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.storage import FILE_MODE, stamp_path
from stamps.validation import Code, schema_problems, semantic_problems
from virgo import progress

logger = logging.getLogger(__name__)

TAG = "virgo"

_CODE_IDS = {
    Code.DUPLICATE_NAME: "virgo.E004",
    Code.DUPLICATE_ACTION: "virgo.E004",
    Code.PROJECTION_LOSS: "virgo.E005",
    Code.UNREGISTERED_HANDLER: "virgo.E006",
}


@register(TAG)
def check_active_stamps(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "stamps" for config in app_configs):
        return []
    return active_stamp_messages()


def active_stamp_messages(*, registry: HandlerRegistry = HANDLERS) -> list[CheckMessage]:
    try:
        generations = list(
            Generation.objects.filter(number=F("persona__generation"))
            .select_related("persona", "stamp")
            .order_by("persona_id")
        )
    except DatabaseError:
        # Not migrated yet (a first `migrate` runs the checks too): there is nothing to check.
        return []
    messages: list[CheckMessage] = []
    for generation in progress.track(generations, "active stamps verified"):
        messages += generation_messages(generation, registry=registry)
    return messages


def _who(generation: Generation) -> str:
    persona = generation.persona
    return f"persona {persona.name!r} ({persona.uuid}) generation {generation.number}"


def generation_messages(
    generation: Generation, *, registry: HandlerRegistry = HANDLERS
) -> list[CheckMessage]:
    persona = generation.persona
    who = _who(generation)
    if generation.standing is None:
        return [
            Warning(
                f"{who}: its stamp is owed (the build is pending)",
                hint="Run a Celery worker, or `virgo stamp build`, to build it.",
                obj=persona,
                id="virgo.W001",
            )
        ]
    if generation.standing is False:
        reasons = "; ".join(generation.not_standing_reasons) or "no reason recorded"
        return [
            Warning(
                f"{who} does not stand and is not advertised: {reasons}",
                obj=persona,
                id="virgo.W002",
            )
        ]
    return stamp_file_messages(generation, registry=registry)


def stamp_file_messages(
    generation: Generation, *, registry: HandlerRegistry = HANDLERS
) -> list[CheckMessage]:
    persona = generation.persona
    who = _who(generation)
    messages: list[CheckMessage] = []
    path = stamp_path(persona.uuid, generation.number)
    stored: CapabilityStamp | None = getattr(generation, "stamp", None)
    try:
        stored_stamp_of(generation)
    except StampNotVerifiable as exc:
        code = "virgo.E008" if stored is None else "virgo.E010"
        messages.append(Error(f"{who}: {exc}", obj=persona, id=code))
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return [
            *messages,
            Error(f"{who}: stamp file {path} is missing", obj=persona, id="virgo.E001"),
        ]
    if stored is None:
        # Nothing the file could be verified against.
        return messages
    if mode & ~FILE_MODE:
        messages.append(
            Error(
                f"{who}: stamp file {path} is not owner-private (mode {mode:o}, not 600)",
                obj=persona,
                id="virgo.E009",
            )
        )
    actual = sha256_hex(data)
    if actual != stored.stamp_hash:
        messages.append(
            Error(
                f"{who}: stamp file {path} was altered (sha256 {actual}, stored "
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
            Error(f"{who}: stamp file {path} is malformed: {exc}", obj=persona, id="virgo.E003"),
        ]
    problems = schema_problems(document)
    if problems:
        return messages + [
            Error(f"{who}: stamp file {path}: {p.message}", obj=persona, id="virgo.E003")
            for p in problems
        ]
    for problem in semantic_problems(document, registry=registry):
        messages.append(
            Error(
                f"{who}: {problem.message}",
                obj=persona,
                id=_CODE_IDS.get(problem.code, "virgo.E007"),
            )
        )
    if not name_the_same_tools(projections_of(document)):
        messages.append(
            Error(
                f"{who}: the MCP tool list, handler table and launcher allowlist do not name "
                "the same tools",
                obj=persona,
                id="virgo.E005",
            )
        )
    return messages


def require_valid_stamps() -> None:
    """Raise SystemCheckError listing every boot error; servers and workers call it at start."""
    errors = [message for message in active_stamp_messages() if message.is_serious()]
    if errors:
        raise SystemCheckError(
            "Virgo refuses to start: active capability stamps failed boot validation.\n"
            + "\n".join(f"{error.id}: {error.msg}" for error in errors)
        )


def refuse_to_start_worker(**kwargs: Any) -> None:
    """Celery `worker_init`: a worker with an invalid active stamp must not start.

    Celery logs and swallows exceptions raised by signal handlers, so the refusal is an exit.
    """
    try:
        require_valid_stamps()
    except SystemCheckError as refused:
        logger.error("%s", refused)
        print(refused, file=sys.stderr)
        raise SystemExit(1) from None
