"""`persona_export <uuid> <archive>`: write a persona snapshot (`virgo persona export`)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.launcher import persona_by_uuid
from runtime.snapshot import SnapshotError, export_persona


class Command(BaseCommand):
    help = "Export a persona, its generations, stamps and experience layer to a snapshot archive."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("persona", help="The persona's uuid.")
        parser.add_argument("archive", type=Path, help="The archive to create (.tar.gz).")

    def handle(self, *args: Any, **options: Any) -> None:
        persona = persona_by_uuid(options["persona"])
        try:
            archive = export_persona(persona, options["archive"])
        except FileExistsError:
            raise CommandError(
                f"{options['archive']} exists; snapshots are never overwritten"
            ) from None
        except SnapshotError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Exported persona {persona.name} ({persona.uuid}) to {archive}")
