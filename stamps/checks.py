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
import multiprocessing
import multiprocessing.util
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from multiprocessing.pool import AsyncResult, Pool
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.management.base import SystemCheckError
from django.db import DatabaseError, connection, connections
from django.db.models import F
from jsonschema.exceptions import SchemaError

from personas.catalogue import VERBS
from personas.models import Generation, Persona
from stamps.integrity import file_verifies, stamp_file_messages, who
from stamps.quarantine import (
    FoundBy,
    is_quarantined,
    quarantine_message,
    quarantined_personas,
    settle,
)
from stamps.registry import HANDLERS, HandlerRegistry
from stamps.validation import Verdicts, compile_schema
from virgo import progress

logger = logging.getLogger(__name__)

TAG = "virgo"
# Generations per batch of `virgo check`: one query reads a batch, one process verifies it.
_BATCH = 500
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


def active_stamp_messages(
    *, registry: HandlerRegistry = HANDLERS, processes: int | None = None
) -> list[CheckMessage]:
    """`virgo check`: every current generation verified; a broken standing one is repaired or
    quarantined on the spot (stamps.quarantine), and every quarantine still open is an error.

    Batches are verified in `processes` worker processes (VIRGO_CHECK_PROCESSES, the cores by
    default) where that can work (`_parallel`), else here; either way the messages are the same,
    in the same order, and no more than a few batches are held at once."""
    processes = processes or settings.VIRGO_CHECK_PROCESSES
    current = _current_generations()
    messages: list[CheckMessage] = []
    owed = 0
    try:
        with ExitStack() as workers:
            ranges = _pk_ranges(current)
            if _parallel(processes):
                # Forked before the progress bar starts a thread: a fork copies no thread.
                pool = workers.enter_context(_worker_pool(processes, registry=registry))
                done = _verified_in_order(pool, ranges, in_flight=2 * processes)
            else:
                verdicts = Verdicts(registry=registry)
                done = (verify_range(bounds, verdicts=verdicts) for bounds in ranges)
            tracked = progress.track(
                done, "active stamps verified", total=current.count, steps=lambda v: v.examined
            )
            for verified in tracked:
                owed += verified.owed
                messages += verified.messages
    except DatabaseError:
        return []
    return _owed(owed) + messages


def _current_generations() -> Any:
    """Every persona's current generation, with what verifying its file reads and no more."""
    return (
        Generation.objects.filter(number=F("persona__generation"))
        .select_related("persona", "stamp")
        # Everything else is read only for a finding (a deferred field loads when asked for).
        .only(
            "persona_id",
            "number",
            "standing",
            "not_standing_reasons",
            "stamp_hash",
            "revoked_at",
            "persona__uuid",
            "persona__name",
            "stamp__persona_uuid",
            "stamp__generation_number",
            "stamp__stamp_hash",
        )
        .order_by("pk")
    )


def _pk_ranges(generations: Any) -> Iterator[tuple[int, int]]:
    """(first pk, last pk) of each batch of `generations` (ordered by pk), each read when the one
    before has been handed out: ids only, so the batches are cut here and read where verified."""
    last_id = 0
    while ids := list(generations.filter(pk__gt=last_id).values_list("pk", flat=True)[:_BATCH]):
        yield ids[0], ids[-1]
        last_id = ids[-1]


@dataclass
class Verified:
    """What verifying one batch found: how many were looked at and owed, and what was said."""

    examined: int
    owed: int
    messages: list[CheckMessage]


def verify_range(bounds: tuple[int, int], *, verdicts: Verdicts) -> Verified:
    """Verify the current generations with pks in `bounds` (inclusive), repairing or quarantining
    what fails (stamps.quarantine: each claim is atomic, so any process may make it).

    Read as column values first: a standing generation whose file verifies with nothing to say
    (file_verifies, most of them) costs no model objects. The rest, read again as generations,
    are said of as generation_messages says, in pk order as ever."""
    first, last = bounds
    rows = (
        _current_generations()
        .filter(pk__gte=first, pk__lte=last)
        .values_list(
            "pk",
            "standing",
            "number",
            "stamp_hash",
            "persona__uuid",
            "stamp__persona_uuid",
            "stamp__generation_number",
            "stamp__stamp_hash",
        )
    )
    verified = Verified(examined=0, owed=0, messages=[])
    unsure: list[int] = []
    for pk, standing, number, stamp_hash, uuid, stored_uuid, stored_number, stored_hash in rows:
        verified.examined += 1
        if standing is None:
            verified.owed += 1
        elif not (
            standing
            and file_verifies(
                persona_uuid=uuid,
                number=number,
                stamp_hash=stamp_hash,
                stored=None if stored_hash is None else (stored_uuid, stored_number, stored_hash),
                verdicts=verdicts,
            )
        ):
            unsure.append(pk)
    if unsure:
        for generation in _current_generations().filter(pk__in=unsure):
            verified.messages += generation_messages(generation, verdicts=verdicts)
    return verified


def _parallel(processes: int) -> bool:
    """Whether worker processes can verify: each reads and writes through its own connection.

    Not on SQLite (the embedded default: one machine, a small fleet, and one writer at a time
    whatever the processes), and not inside a transaction, whose rows no other connection sees
    (a test's, or a caller's): there the batches are verified in it, here.
    """
    return processes > 1 and connection.vendor != "sqlite" and not connection.in_atomic_block


# The worker's verdicts, made once when it starts (_worker_started) and kept for every batch.
_worker_verdicts: Verdicts | None = None


def _worker_started(registry: HandlerRegistry) -> None:
    global _worker_verdicts
    _worker_verdicts = Verdicts(registry=registry)
    # Said goodbye to the database when the pool ends it (close, join), not left to time out.
    multiprocessing.util.Finalize(None, connections.close_all, exitpriority=10)


def _verify_in_worker(bounds: tuple[int, int]) -> Verified:
    assert _worker_verdicts is not None, "set by _worker_started"
    return verify_range(bounds, verdicts=_worker_verdicts)


@contextmanager
def _worker_pool(processes: int, *, registry: HandlerRegistry) -> Iterator[Pool]:
    """`processes` forked workers, each verifying with its own connection and verdicts.

    Forked: a worker starts with this process's settings, apps and registry at once. Every
    connection is closed first, because a child would share its socket; the pool forks all its
    workers when it is made. Ended by closing and joining (each says goodbye to the database),
    or at once if the check itself fails.
    """
    connections.close_all()
    pool = multiprocessing.get_context("fork").Pool(
        processes, initializer=_worker_started, initargs=(registry,)
    )
    try:
        yield pool
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _verified_in_order(
    pool: Pool, ranges: Iterator[tuple[int, int]], *, in_flight: int
) -> Iterator[Verified]:
    """Each range verified by the pool, yielded in order; no more than `in_flight` handed out
    and not yet taken back, so memory stays flat however many stamps there are."""
    pending: deque[AsyncResult[Verified]] = deque()
    for bounds in ranges:
        pending.append(pool.apply_async(_verify_in_worker, (bounds,)))
        if len(pending) >= in_flight:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


def generation_messages(
    generation: Generation, *, verdicts: Verdicts | None = None
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
    found = stamp_file_messages(generation, verdicts=verdicts)
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
