"""Build every capability stamp and card still owed: what Celery beat runs every minute, by hand."""

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from personas.reconciliation import owed_personas, reconcile


class Command(BaseCommand):
    help = (
        "Find every persona whose current generation is owed its stamp or its card (a queued "
        "task was lost: the broker was down, a worker died) and build them. Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--grace",
            type=int,
            default=0,
            metavar="SECONDS",
            help="leave alone generations younger than this (default 0: everything owed now)",
        )
        parser.add_argument("--batch-size", type=int, default=None, metavar="N")
        parser.add_argument(
            "--dry-run", action="store_true", help="list what is owed without building it"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["grace"] < 0:
            raise CommandError("--grace must not be negative")
        if options["batch_size"] is not None and options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        grace = timedelta(seconds=options["grace"])
        if options["dry_run"]:
            owed = owed_personas(settled_before=timezone.now() - grace)
            for uuid, name, generation in owed.values_list("uuid", "name", "generation"):
                self.stdout.write(f"owed: {uuid} {name!r} generation {generation}")
            self.stdout.write(f"{owed.count()} personas owed work")
            return
        report = reconcile(grace=grace, batch_size=options["batch_size"])
        self.stdout.write(
            f"{len(report.owed)} personas owed work: {report.done} done, "
            f"{len(report.failed)} failed"
        )
        if report.failed:
            raise CommandError(
                "could not publish personas with ids "
                + ", ".join(str(pk) for pk in report.failed)
                + " (see the log); run again once the cause is fixed"
            )
