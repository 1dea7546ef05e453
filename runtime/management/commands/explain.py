"""`virgo explain --persona <uuid-or-name> <tool> [--args JSON] [--json]`: what handle() would
do with one call, and why, without doing it (runtime.explain).

The answer is the explanation whatever the verdict, so the status is 0 for an allowed call and
a refused one alike; a persona nothing answers to, or `--args` that is no JSON object, is one
line and status 2.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas.commandline import ANY_PERSONA, EXIT_USAGE, persona_argument
from runtime.explain import explain


class Command(BaseCommand):
    help = "Explain what the runtime would decide for one tool call, without making it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--persona", required=True, help="The persona: its id, uuid or unambiguous name."
        )
        parser.add_argument("tool", help="The tool name, as the agent would call it.")
        # Not `args`: Django's call_command keeps that name for positional arguments.
        parser.add_argument(
            "--args",
            dest="arguments",
            default="{}",
            help="The call's arguments as one JSON object (default {}).",
        )
        parser.add_argument(
            "--json", action="store_true", help="Print the explanation as one JSON document."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        arguments = parse_arguments(options["arguments"])
        persona = persona_argument(options["persona"], among=ANY_PERSONA, flag="--persona")
        explanation = explain(persona, options["tool"], arguments)
        if options["json"]:
            self.stdout.write(json.dumps(explanation.as_json(), indent=2, ensure_ascii=True))
            return
        for line in explanation.lines():
            self.stdout.write(line)


def parse_arguments(text: str) -> dict[str, Any]:
    """`--args` as the JSON object it must be, or the one line that says what is wrong."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"--args: not JSON ({exc})", returncode=EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CommandError("--args: must be a JSON object", returncode=EXIT_USAGE)
    return value
