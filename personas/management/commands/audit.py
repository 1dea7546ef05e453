"""`virgo audit export [--since WHEN] [--until WHEN] [--format jsonl]`: the audit trail as JSON
lines, all of it unless --since or --until bound it.

One JSON object per event, oldest first (by time, then by id), streamed: the events are read
in chunks through a server-side cursor where the database has one (`.iterator(chunk_size=...)`
over plain rows, never model instances), and each line is written as it is read, so memory
stays the same for ten events or ten million (VX-AUDIT-1).

WHEN is an ISO 8601 date or time (`2026-12-01`, `2026-12-01T09:00:00Z`; without an offset, UTC)
or a duration back from now (`90s`, `30m`, `24h`, `7d`, `2w`). `--since` is inclusive,
`--until` exclusive. A WHEN that is neither, or an `--until` not after `--since`, ends the
command in one line naming the option, exit status 2.
"""

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from personas import audit
from personas.models import AuditEvent

EXIT_USAGE = 2
CHUNK_SIZE = 2000
FIELDS = (
    "id",
    "at",
    "kind",
    "actor_name",
    "channel",
    "correlation_id",
    "persona__uuid",
    "persona__name",
    "agent__name",
    "data",
)
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
WHEN_HELP = (
    "an ISO 8601 date or time (2026-12-01, 2026-12-01T09:00:00Z) or a duration (30m, 24h, 7d)"
)


def parse_when(text: str, *, option: str, now: datetime) -> datetime:
    """A moment from an ISO date or time, or a duration back from `now`; CommandError naming
    `option` and why otherwise."""
    value = text.strip()
    duration = _DURATION.match(value)
    if duration:
        return now - timedelta(**{_UNITS[duration[2]]: int(duration[1])})
    try:
        moment = parse_datetime(value.replace("Z", "+00:00"))
        day = None if moment else parse_date(value)
    except ValueError:
        moment = day = None
    if day is not None:
        moment = datetime(day.year, day.month, day.day)
    if moment is None:
        raise CommandError(f"{option}: {text!r} is not {WHEN_HELP}", returncode=EXIT_USAGE)
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    return moment


def export_line(row: dict[str, Any]) -> str:
    """One event as its JSON line: who by name, what in words and as data, when, through what."""
    persona_uuid = row["persona__uuid"]
    data = row["data"] or {}
    document = {
        "id": row["id"],
        # Always to the microsecond: the lines' times sort as text too.
        "at": row["at"].astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "kind": row["kind"],
        "actor": row["actor_name"],
        "channel": row["channel"],
        "correlation_id": row["correlation_id"],
        "persona": {"uuid": str(persona_uuid), "name": row["persona__name"]}
        if persona_uuid
        else None,
        "agent": row["agent__name"],
        "summary": audit.describe(row["kind"], data),
        "data": data,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)


def export_rows(since: datetime | None, until: datetime | None) -> Iterator[dict[str, Any]]:
    events = AuditEvent.objects.all()
    if since is not None:
        events = events.filter(at__gte=since)
    if until is not None:
        events = events.filter(at__lt=until)
    return events.order_by("at", "id").values(*FIELDS).iterator(chunk_size=CHUNK_SIZE)


class Command(BaseCommand):
    help = "Export the audit trail as JSON lines, oldest first, streamed."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        export = actions.add_parser(
            "export", help="Every event (from --since, to --until) as one JSON object per line."
        )
        export.add_argument("--since", metavar="WHEN", help=f"{WHEN_HELP}; default the first event")
        export.add_argument("--until", metavar="WHEN", help=f"{WHEN_HELP}; default now")
        export.add_argument(
            "--format", dest="export_format", default="jsonl", choices=["jsonl"], help="jsonl"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        since = None
        if options.get("since"):
            since = parse_when(options["since"], option="--since", now=now)
        until = None
        if options.get("until"):
            until = parse_when(options["until"], option="--until", now=now)
            if since is not None and until <= since:
                raise CommandError(
                    f"--until: {options['until']!r} is not after --since {options['since']!r}",
                    returncode=EXIT_USAGE,
                )
        write = self.stdout.write
        for row in export_rows(since, until):
            write(export_line(row))
