"""`virgo launch --persona <uuid> [--print-allowlist | -- <agent command...>]`."""

import argparse
import os
import shutil
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas.commandline import EXIT_USAGE, persona_argument
from runtime.launcher import ANY_PERSONA, agent_invocation, allowlist
from runtime.stamp import StampUnavailable, load_active_stamp


class Command(BaseCommand):
    help = "Start an agent CLI with exactly the persona's stamped tools and its MCP server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--persona", required=True, help="The persona: its id, uuid or unambiguous name."
        )
        parser.add_argument(
            "--print-allowlist",
            action="store_true",
            help="Print mcp__virgo__<tool>,... for the stamp's tools and exit.",
        )
        parser.add_argument("agent_command", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        command = [] if options["print_allowlist"] else self._agent_command(options)
        persona = persona_argument(options["persona"], among=ANY_PERSONA, flag="--persona")
        try:
            stamp = load_active_stamp(persona)
        except StampUnavailable as exc:
            raise CommandError(f"refusing to launch persona {persona.uuid}: {exc.reason}") from None
        if options["print_allowlist"]:
            self.stdout.write(allowlist(stamp))
            return
        argv, env = agent_invocation(persona, stamp, command)
        self.stdout.flush()
        os.execvpe(argv[0], argv, env)

    @staticmethod
    def _agent_command(options: dict[str, Any]) -> list[str]:
        command = list(options["agent_command"])
        if command[:1] == ["--"]:
            command = command[1:]
        if not command:
            raise CommandError("give the agent command after --, e.g. launch --persona X -- claude")
        # Found first, before the database is asked or the MCP config written: exec would
        # fail only after both, in a traceback (VX-OPS-7). The agent's PATH is the launcher's
        # (launcher.AGENT_ENV_NAMES passes it unchanged).
        if shutil.which(command[0]) is None:
            raise CommandError(
                f"agent command {command[0]!r} not found on PATH: install it, or give its full "
                "path after --",
                returncode=EXIT_USAGE,
            )
        return command
