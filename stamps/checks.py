"""Stamp checks, as Django system checks: constant-time at start-up, every file in `virgo check`.

Start-up (VX-OPS-5): every command that runs the system checks (migrate, runserver, launch, mcp
serve...), virgo-web before it binds and every Celery worker before it takes a task check what
does not grow with the fleet: the stamp schema compiles, every handler action of the verb
catalogue is declared in the one registry (V1-FAC-7), and how many stamps are owed and how many
personas are quarantined, each said once. No stamp file is opened: one persona's broken file
must not stop the processes that serve all the others (VX-OPS-4). Per-persona verification
happens where it concerns one persona: in the periodic sweep and when a runtime loads the stamp
(stamps.quarantine).

`virgo check` (manage.py check, virgo.management.commands.check) verifies every active stamp as
well, for release pipelines: it exits non-zero listing every problem, and what it finds is
repaired or quarantined as the sweep would (stamps.quarantine). Its messages:

    virgo.E001-E010, E013  what is wrong with one file (stamps.integrity)
    virgo.E011  the stamp schema does not compile   virgo.E012  persona quarantined (until restored)
    virgo.W001  N stamps owed (builds pending)     virgo.W002  generation does not stand
    virgo.W003  (retired: a file not on this machine is no finding, VX-SCALE-2)
    virgo.W004  a file was made owner-private again
    virgo.W005  N personas quarantined (start-up; `virgo check` names each, virgo.E012)
"""

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.core.management.base import SystemCheckError
from django.db import DatabaseError
from django.db.models import F
from jsonschema.exceptions import SchemaError

from personas.catalogue import VERBS
from personas.models import Generation, Persona
from stamps.integrity import stamp_file_messages, who
from stamps.quarantine import (
    FoundBy,
    is_quarantined,
    quarantine_message,
    quarantined_personas,
    settle,
)
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.validation import compile_schema
from virgo import progress

logger = logging.getLogger(__name__)

TAG = "virgo"
# How many generations `virgo check` holds in memory at once.
_BATCH = 2000
# Start-up counts owed stamps and quarantined personas only this far: a count of every owed row
# grows with the backlog (0.1 s with 100k owed), and start-up must not (VX-OPS-5).
START_COUNT_CAP = 1000

_every_stamp: ContextVar[bool] = ContextVar("verifying_every_stamp", default=False)


@contextmanager
def verifying_every_stamp() -> Iterator[None]:
    """Within this block the system checks verify every active stamp (`virgo check`)."""
    token = _every_stamp.set(True)
    try:
        yield
    finally:
        _every_stamp.reset(token)


def every_stamp_verified() -> bool:
    """Whether the checks now running are `virgo check`'s, which may look at every persona."""
    return _every_stamp.get()


@register(TAG)
def check_stamps(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "stamps" for config in app_configs):
        return []
    if every_stamp_verified():
        return [*fleet_messages(), *active_stamp_messages()]
    return [*fleet_messages(), *backlog_messages()]


def fleet_messages(*, registry: HandlerRegistry = HANDLERS) -> list[CheckMessage]:
    """What every persona's stamp depends on alike: the schema, the handler registry."""
    messages: list[CheckMessage] = []
    try:
        compile_schema()
    except (OSError, ValueError, SchemaError) as exc:
        messages.append(
            Error(f"the capability stamp schema v3 cannot be used: {exc}", id="virgo.E011")
        )
    undeclared = sorted(
        {verb.handler_action for verb in VERBS if not registry.is_registered(verb.handler_action)}
    )
    if undeclared:
        messages.append(
            Error(
                "handler actions of the verb catalogue missing from the handler registry: "
                + ", ".join(undeclared),
                id="virgo.E006",
            )
        )
    return messages


def backlog_messages() -> list[CheckMessage]:
    """One line however many stamps are owed, one however many personas are quarantined.

    Both count only personas that do not stand, which an index of their own holds, and no
    further than START_COUNT_CAP ("over 1,000"): `virgo check` and /metrics count them all.
    """
    try:
        owed = _capped_count(Persona.objects.filter(standing__isnull=True))
        quarantined = _capped_count(quarantined_personas())
    except DatabaseError:
        # Not migrated yet (a first `migrate` runs the checks too): nothing can be owed.
        return []
    messages = _owed(owed, capped=True)
    if quarantined:
        messages.append(
            Warning(
                f"{_how_many(quarantined, capped=True)} persona{'s' if quarantined != 1 else ''} "
                "quarantined for a broken stamp file (not advertised, their runtimes refuse)",
                hint="`virgo check` names each file and why; `virgo stamp restore PERSONA` "
                "lifts a quarantine.",
                id="virgo.W005",
            )
        )
    return messages


def _capped_count(personas: Any) -> int:
    """How many, read no further than one past START_COUNT_CAP (said as "over" the cap)."""
    return int(personas[: START_COUNT_CAP + 1].count())


def _how_many(count: int, *, capped: bool) -> str:
    return f"over {START_COUNT_CAP:,}" if capped and count > START_COUNT_CAP else str(count)


def _owed(count: int, *, capped: bool = False) -> list[CheckMessage]:
    if not count:
        return []
    return [
        Warning(
            f"{_how_many(count, capped=capped)} stamp{'s' if count != 1 else ''} owed "
            "(builds pending)",
            hint="A Celery worker builds them, or `virgo reconcile`.",
            id="virgo.W001",
        )
    ]


def active_stamp_messages(*, registry: HandlerRegistry = HANDLERS) -> list[CheckMessage]:
    """`virgo check`: every current generation verified; a broken standing one is repaired or
    quarantined on the spot (stamps.quarantine), and every quarantine still open is an error."""
    current = (
        Generation.objects.filter(number=F("persona__generation"))
        .select_related("persona", "stamp")
        .defer("composition", "stamp__body")
        .order_by("pk")
    )
    messages: list[CheckMessage] = []
    owed = 0
    try:
        batches = progress.track(
            _batches(current), "active stamps verified", total=current.count, steps=len
        )
        for batch in batches:
            for generation in batch:
                if generation.standing is None:
                    owed += 1
                else:
                    messages += generation_messages(generation, registry=registry)
    except DatabaseError:
        return []
    return _owed(owed) + messages


def _batches(generations: Any) -> Iterator[list[Generation]]:
    """`generations` (ordered by pk) in batches, each read when the one before is done."""
    last_id = 0
    while batch := list(generations.filter(pk__gt=last_id)[:_BATCH]):
        yield batch
        last_id = batch[-1].pk


def generation_messages(
    generation: Generation, *, registry: HandlerRegistry = HANDLERS
) -> list[CheckMessage]:
    """What `virgo check` says of one current generation whose stamp is not owed."""
    if generation.standing is False:
        if is_quarantined(generation):
            return [quarantine_message(generation)]
        reasons = "; ".join(generation.not_standing_reasons) or "no reason recorded"
        return [
            Warning(
                f"{who(generation)} does not stand and is not advertised: {reasons}",
                obj=generation.persona,
                id="virgo.W002",
            )
        ]
    found = stamp_file_messages(generation, registry=registry)
    return settle(generation, found, found_by=FoundBy.CHECK)


def start_checks() -> list[CheckMessage]:
    """virgo-web before it binds and every worker before it takes a task (constant time).

    Raises SystemCheckError when something every persona depends on is broken; logs the rest
    (how many stamps are owed) once, and returns it.
    """
    messages = [*fleet_messages(), *backlog_messages()]
    errors = [message for message in messages if message.is_serious()]
    if errors:
        raise SystemCheckError(
            "Virgo refuses to start: what every capability stamp depends on is broken.\n"
            + "\n".join(f"{error.id}: {error.msg}" for error in errors)
        )
    for message in messages:
        logger.warning("%s: %s. %s", message.id, message.msg, message.hint or "")
    return messages


def check_web_start(**kwargs: Any) -> None:
    """virgo.startup.web_starting: start_checks; what they raise keeps virgo-web from binding."""
    start_checks()


def check_worker_start(**kwargs: Any) -> None:
    """Celery `worker_init`: start_checks, and a worker they fail must not start.

    Celery logs and swallows exceptions raised by signal handlers, so the refusal is an exit.
    """
    try:
        start_checks()
    except SystemCheckError as refused:
        logger.error("%s", refused)
        print(refused, file=sys.stderr)
        raise SystemExit(1) from None
