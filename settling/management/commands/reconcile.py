"""Build every capability stamp and card still owed: what Celery beat runs every minute, by hand.

On a terminal it shows its progress (virgo.progress). `--json` prints only a JSON document on
stdout, `{"owed": N, "done": N, "failed": [{"id", "uuid"}]}` (with `--dry-run`: `{"owed": N,
"personas": [{"uuid", "name", "generation"}]}`), so `virgo reconcile --json | jq` works; a
failure still exits non-zero, its message on stderr.
"""

import json
import sys
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from cards.base_url import BaseUrlMismatch, check_base_url
from personas.models import Persona
from settling.reconciliation import owed_personas, reconcile
from virgo import progress


class Command(BaseCommand):
    help = (
        "Build every stamp and card owed (a queued task was lost). It finds each persona whose "
        "current generation is owed its stamp or its card (the broker was down, a worker died) "
        "and builds them. Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--grace",
            type=int,
            default=0,
            metavar="SECONDS",
            help="leave alone generations younger than this (default 0: everything owed now)",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            metavar="N",
            help="how many personas one pass settles (default: the installation's setting)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list what is owed without building it"
        )
        parser.add_argument(
            "--json", action="store_true", help="print only a JSON document of the outcome"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["grace"] < 0:
            raise CommandError("--grace must not be negative")
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            # What this process would call owed is judged by its own URL: every card, on a
            # machine configured with another than the installation's.
            check_base_url()
        except BaseUrlMismatch as refused:
            raise CommandError(f"{refused}: nothing is published here; {refused.fix}") from None
        grace = timedelta(seconds=options["grace"])
        as_json = options["json"]
        if options["dry_run"]:
            owed = owed_personas(settled_before=timezone.now() - grace)
            rows = [
                {"uuid": str(uuid), "name": name, "generation": generation}
                for uuid, name, generation in owed.values_list("uuid", "name", "generation")
            ]
            if as_json:
                self.stdout.write(json.dumps({"owed": len(rows), "personas": rows}, indent=2))
                return
            for row in rows:
                self.stdout.write(
                    f"owed: {row['uuid']} {row['name']!r} generation {row['generation']}"
                )
            self.stdout.write(f"{len(rows)} personas owed work")
            return
        with progress.shown_on(sys.stderr):
            report = reconcile(grace=grace, batch_size=options["batch_size"])
        if as_json:
            failed = Persona.objects.filter(pk__in=report.failed).order_by("pk")
            document = {
                "owed": len(report.owed),
                "done": report.done,
                "failed": [
                    {"id": pk, "uuid": str(uuid)} for pk, uuid in failed.values_list("pk", "uuid")
                ],
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            self.stdout.write(
                f"{len(report.owed)} personas owed work: {report.done} done, "
                f"{len(report.failed)} failed"
            )
            if report.resigned or report.unsigned:
                self.stdout.write(
                    f"{report.resigned} cards signed again by the current keys, "
                    f"{len(report.unsigned)} could not be"
                )
        if report.unsigned:
            raise CommandError(
                "could not sign the cards of personas with ids "
                + ", ".join(str(pk) for pk in report.unsigned)
                + " (see the log: is a signing key file unusable?)"
            )
        if report.failed:
            raise CommandError(
                "could not publish personas with ids "
                + ", ".join(str(pk) for pk in report.failed)
                + " (see the log); run again once the cause is fixed"
            )
