"""One broken stamp file is its persona's problem alone (VX-OPS-4): repaired, or quarantined.

Three readers find a stamp file that no longer holds its generation's stored stamp: `virgo check`
(the release step), the periodic sweep (Celery beat, every VIRGO_STAMP_VERIFY_INTERVAL_SECONDS)
and the runtime's load (runtime.stamp.load_active_stamp: every MCP request, launch and tool
call). Each hands what stamps.integrity found to `settle`:

- a missing file is nothing wrong (VX-SCALE-2): stamp files live under each machine's own
  VIRGO_HOME and are materialised from the stored stamp's immutable bytes where a persona runs,
  when its runtime first loads it (`materialise`), so a machine that never ran a persona has no
  file for it, and neither the check nor the sweep warns, rewrites or records anything for it;
- a file others may read is made owner-private again: a repair, with a WARNING line and an audit
  event, nothing more;
- anything else (altered bytes, a malformed or unprojectable document, a stored stamp its
  generation's hash does not name) quarantines the generation at once: it and its persona stop
  standing, so its card is withdrawn on every web process (the card token moves), the directory
  drops it, and its MCP server and launcher refuse with the reason; an ERROR line and an audit
  event name the file and why, and so does the admin.

A file that cannot be read at all (an OS error) is refused by the runtime but not quarantined:
that is the machine's condition, often every file's at once, not this persona's.

A quarantined generation is one that does not stand although its stamp is stored: a build that
was refused never stores one, so it needs no column of its own. It comes back in one of two
ways: a new generation (any change to the persona: the factory writes a new file), or
`virgo stamp restore`, which sets the bad file aside, puts the stored bytes in its place and
lifts the quarantine once they verify. Nothing lifts it by itself: a file that changed under
Virgo is for an operator to look at first.
"""

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from personas import audit
from personas.models import AuditEvent, Generation, Persona
from personas.signals import personas_written
from stamps.integrity import (
    MISSING,
    NOT_PRIVATE,
    UNREADABLE,
    file_is_intact,
    stamp_file_messages,
    who,
)
from stamps.models import CapabilityStamp, StampNotVerifiable, stored_stamp_of
from stamps.storage import FILE_MODE, stamp_path, write_stamp_file
from virgo import metrics

logger = logging.getLogger(__name__)

_REPAIRABLE = frozenset({NOT_PRIVATE})


class FoundBy(StrEnum):
    CHECK = "virgo check"
    SWEEP = "the verification sweep"
    LOAD = "the runtime's load"


def restore_command(persona: Persona) -> str:
    return f"virgo stamp restore {persona.uuid}"


def is_quarantined(generation: Generation) -> bool:
    """Not standing though its stamp is stored, and not because it was revoked (VX-TRUST-5)."""
    return (
        generation.standing is False
        and generation.revoked_at is None
        and hasattr(generation, "stamp")
    )


def quarantined_personas() -> Any:
    """Personas whose current generation is quarantined (counted at start-up and per scrape)."""
    return Persona.objects.filter(
        standing=False,
        generations__number=F("generation"),
        generations__stamp__isnull=False,
        generations__revoked_at__isnull=True,
    )


@metrics.scraped
def _quarantined_gauge() -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "virgo_quarantined_personas",
        "Personas out of service because their stamp file no longer holds their stored stamp.",
        value=quarantined_personas().count(),
    )


# Acting on findings -------------------------------------------------------------------------------


def settle(
    generation: Generation, messages: list[CheckMessage], *, found_by: FoundBy
) -> list[CheckMessage]:
    """Repair or quarantine after `messages` (stamps.integrity) were found for a standing
    generation; returns the messages as they stand afterwards (a repair's are warnings).

    A file that is not on this machine is not a finding: it is materialised where the persona
    runs (VX-SCALE-2). Only one that exists and differs from the stored stamp is tampering."""
    if any(message.id == MISSING for message in messages) and _verifiable(generation):
        messages = [message for message in messages if message.id != MISSING]
    serious = [message for message in messages if message.is_serious()]
    if not serious:
        return messages
    if {message.id for message in serious} <= _REPAIRABLE and _verifiable(generation):
        try:
            done = _repair(generation, {message.id for message in serious}, found_by=found_by)
        except OSError as exc:
            # The file system refuses the repair (read-only, full): the machine's condition.
            logger.error("%s: the stamp file cannot be repaired: %s", who(generation), exc)
            return messages
        after = stamp_file_messages(generation)
        serious = [message for message in after if message.is_serious()]
        if not serious:
            return done
        messages = done + after
    if any(message.id == UNREADABLE for message in serious):
        logger.error("%s", "; ".join(message.msg for message in serious))
        return messages
    label = f"{who(generation)}: "
    quarantine(
        generation,
        [message.msg.removeprefix(label) for message in serious],
        found_by=found_by,
    )
    return messages


def _verifiable(generation: Generation) -> bool:
    try:
        stored_stamp_of(generation)
    except StampNotVerifiable:
        return False
    return True


def _repair(
    generation: Generation, found: set[str | None], *, found_by: FoundBy
) -> list[CheckMessage]:
    stored: CapabilityStamp = generation.stamp
    path = stored.path
    done: list[CheckMessage] = []
    if NOT_PRIVATE in found:
        os.chmod(path, FILE_MODE)
        _record_repair(generation, path, "made owner-private (mode 600)", found_by)
        done.append(
            Warning(
                f"{who(generation)}: stamp file {path} was readable by others; made owner-private",
                obj=generation.persona,
                id="virgo.W004",
            )
        )
    return done


def materialise(generation: Generation, stored: CapabilityStamp) -> bytes:
    """Write the generation's stamp file on this machine from the stored stamp (its immutable
    row), where the persona's runtime is about to load it and finds none; the bytes now in place.

    Not a repair: each machine keeps its own files under its VIRGO_HOME, and one that never ran
    the persona has none (VX-SCALE-2). So no warning and no audit event, only a DEBUG line."""
    path = write_stamp_file(stored.path, stored.data)
    logger.debug("%s: stamp file %s materialised from the stored stamp", who(generation), path)
    return stored.data


def _record_repair(generation: Generation, path: Path, what: str, found_by: FoundBy) -> None:
    logger.warning("%s: stamp file %s %s (found by %s)", who(generation), path, what, found_by)
    audit.record(
        AuditEvent.Kind.STAMP_REPAIRED,
        persona=generation.persona,
        consequence=True,
        data={
            "generation": generation.number,
            "path": str(path),
            "repair": what,
            "found_by": str(found_by),
        },
    )


def quarantine(generation: Generation, reasons: Iterable[str], *, found_by: FoundBy) -> bool:
    """Take a standing generation, and its persona while it is the current one, out of service.

    True when this call quarantined it; False when it did not stand (already quarantined, or
    another reader got there first), so each quarantine is logged and recorded once.
    """
    reasons = [f"quarantined by {found_by}", *reasons]
    persona = generation.persona
    path = str(stamp_path(persona.uuid, generation.number))
    with transaction.atomic():
        claimed = Generation.objects.filter(pk=generation.pk, standing=True).update(
            standing=False, not_standing_reasons=reasons
        )
        if not claimed:
            return False
        Persona.objects.filter(pk=persona.pk, generation=generation.number).update(standing=False)
        audit.record(
            AuditEvent.Kind.STAMP_QUARANTINED,
            persona=persona,
            consequence=True,
            data={
                "generation": generation.number,
                "path": path,
                "reasons": reasons,
                "found_by": str(found_by),
            },
        )
        # Every web process reloads the card, finds the persona not standing and withdraws it.
        personas_written.send(Persona, uuids=[persona.uuid], after_commit=True)
    generation.standing, generation.not_standing_reasons = False, reasons
    logger.error(
        "%s: stamp quarantined: %s. Its card is withdrawn and its runtime refuses until the "
        "file is restored (`%s`) or a new generation is made.",
        who(generation),
        "; ".join(reasons),
        restore_command(persona),
    )
    return True


# Bringing one back ------------------------------------------------------------------------------


@dataclass
class Restoration:
    generation: Generation
    path: Path
    set_aside: Path | None = None
    problems: list[CheckMessage] = field(default_factory=list)
    lifted: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


def restore(*, persona: Persona) -> Restoration:
    """`virgo stamp restore`: put the stored stamp back in place of the persona's current file.

    A file that differs is moved aside (`CAPABILITY-STAMP.json.set-aside-<UTC time>`, kept for
    whoever investigates), the stored bytes are written in its place, and the file is verified
    in full; once it verifies, a quarantine is lifted. The stamp itself, the row, never changes.
    Raises StampNotVerifiable when there is no stored stamp to restore from.
    """
    generation = (
        Generation.objects.select_related("persona", "stamp")
        .filter(persona_id=persona.pk, number=F("persona__generation"))
        .get()
    )
    stored = stored_stamp_of(generation)
    path = stored.path
    restoration = Restoration(generation, path)
    try:
        present: bytes | None = path.read_bytes()
    except FileNotFoundError:
        present = None
    if present is not None and present != stored.data:
        stamp = timezone.now().strftime("%Y%m%dT%H%M%S%fZ")
        restoration.set_aside = path.with_name(f"{path.name}.set-aside-{stamp}")
        os.rename(path, restoration.set_aside)
    if present != stored.data:
        write_stamp_file(path, stored.data)
    os.chmod(path, FILE_MODE)
    restoration.problems = [m for m in stamp_file_messages(generation) if m.is_serious()]
    if restoration.ok:
        restoration.lifted = _lift(generation, restoration)
    return restoration


def _lift(generation: Generation, restoration: Restoration) -> bool:
    persona = generation.persona
    with transaction.atomic():
        # A revoked generation never stands again, whatever its file holds (VX-TRUST-5).
        lifted = Generation.objects.filter(
            pk=generation.pk, standing=False, stamp__isnull=False, revoked_at__isnull=True
        ).update(standing=True, not_standing_reasons=[])
        if lifted:
            Persona.objects.filter(pk=persona.pk, generation=generation.number).update(
                standing=True
            )
            personas_written.send(Persona, uuids=[persona.uuid], after_commit=True)
        audit.record(
            AuditEvent.Kind.STAMP_RESTORED,
            persona=persona,
            consequence=True,
            data={
                "generation": generation.number,
                "path": str(restoration.path),
                "set_aside": str(restoration.set_aside or ""),
                "lifted": bool(lifted),
            },
        )
    generation.standing, generation.not_standing_reasons = True, []
    logger.info(
        "%s: stamp file %s restored from the stored stamp%s%s",
        who(generation),
        restoration.path,
        f" (the file found there is kept as {restoration.set_aside})"
        if restoration.set_aside
        else "",
        "; quarantine lifted" if lifted else "",
    )
    return bool(lifted)


# The sweep --------------------------------------------------------------------------------------


@dataclass
class SweepReport:
    """Persona uuids by outcome; `unreadable`: files the machine could not read or rewrite;
    `not_here`: how many standing stamps have no file on this machine (never run here)."""

    verified: int = 0
    not_here: int = 0
    repaired: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def sweep(*, batch_size: int | None = None) -> SweepReport:
    """Verify the file of every standing current generation; repair or quarantine what fails.

    A file holding exactly the stored bytes is fine (they were validated before they were first
    written), so most files cost a read and a hash; only a failing one is verified in full.
    Batches of generation ids keep memory flat whatever the fleet.
    """
    batch_size = batch_size or settings.VIRGO_RECOMPUTE_BATCH_SIZE
    report = SweepReport()
    standing = (
        Generation.objects.filter(standing=True, number=F("persona__generation"))
        .select_related("persona", "stamp")
        # The stored bytes are read only to repair a file; its hash is what is compared.
        .defer("composition", "stamp__body")
        .order_by("pk")
    )
    last_id = 0
    while True:
        batch = list(standing.filter(pk__gt=last_id)[:batch_size])
        if not batch:
            break
        for generation in batch:
            report.verified += 1
            if file_is_intact(generation):
                continue
            found = stamp_file_messages(generation)
            after = settle(generation, found, found_by=FoundBy.SWEEP)
            uuid = str(generation.persona.uuid)
            if not after and any(message.id == MISSING for message in found):
                # Not on this machine, which never ran the persona: nothing to verify here.
                report.not_here += 1
            elif generation.standing is False:
                report.quarantined.append(uuid)
            elif any(message.is_serious() for message in after):
                report.unreadable.append(uuid)
            else:
                report.repaired.append(uuid)
        last_id = batch[-1].pk
    if report.repaired or report.quarantined or report.unreadable:
        logger.info(
            "stamp sweep: %d files verified, %d repaired, %d quarantined, %d unreadable",
            report.verified,
            len(report.repaired),
            len(report.quarantined),
            len(report.unreadable),
        )
    return report


def quarantine_message(generation: Generation) -> CheckMessage:
    """What `virgo check` says of a quarantined generation, until it is restored (virgo.E012)."""
    reasons = "; ".join(generation.not_standing_reasons) or "no reason recorded"
    return Error(
        f"{who(generation)} is quarantined: {reasons}",
        hint=f"Restore its file from the stored stamp with `{restore_command(generation.persona)}`"
        ", or make a new generation.",
        obj=generation.persona,
        id="virgo.E012",
    )
