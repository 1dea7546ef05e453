"""`persona_import <archive> --agent <id>`: restore a persona snapshot (`virgo persona import`)."""

from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas.models import Agent
from runtime.snapshot import import_persona


class Command(BaseCommand):
    help = "Import a persona snapshot onto an agent, on behalf of that agent's owner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", type=Path, help="A snapshot made by persona_export.")
        parser.add_argument("--agent", required=True, type=int, help="The target agent's id.")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = Agent.objects.select_related("owner").filter(pk=options["agent"]).first()
        if agent is None:
            raise CommandError(f"no agent with id {options['agent']}")
        try:
            outcome = import_persona(options["archive"], agent=agent, actor=agent.owner)
        except (ValidationError, PermissionDenied) as exc:
            messages = exc.messages if isinstance(exc, ValidationError) else [str(exc)]
            raise CommandError("; ".join(messages)) from None
        persona = outcome.persona
        self.stdout.write(
            f"Imported persona {persona.name} ({persona.uuid}): {outcome.generations} "
            f"generations, {outcome.stamps} stamps, {outcome.experience_entries} learned choices, "
            f"{outcome.overlay_entries} class-overlay entries."
        )
        for skipped in outcome.skipped:
            self.stdout.write(f"Skipped: {skipped}")
