"""`virgo agent list [--owner USERNAME] [--json]`: the agents, with the ids other commands take.

Without `--owner` the list is the installation's, as every other command (`launch`, `stamp`,
`persona export`) reaches every persona: whoever runs `virgo` holds the database already.
`--owner` narrows it to that owner's agents, the ones `persona add --owner` may use.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from personas.commandline import (
    AGENT_HEADINGS,
    agent_documents,
    agent_row,
    user_argument,
    write_list,
)
from personas.models import Agent
from personas.selectors import agents_owned_by


class Command(BaseCommand):
    help = "List agents."
    # A list is how an owner finds what to repair, so a broken stamp must not stop it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser(
            "list", help="The agents by id: id, name, owner and how many personas each has."
        )
        listing.add_argument("--owner", metavar="USERNAME", help="only this owner's agents")
        listing.add_argument(
            "--json", action="store_true", help="a JSON list of objects, for scripts"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        agents = Agent.objects.all()
        empty = "No agents."
        if options["owner"]:
            owner = user_argument(options["owner"], flag="--owner")
            agents = agents_owned_by(owner)
            empty = f"{owner.get_username()} has no agents."
        write_list(
            self.stdout,
            agent_documents(agents),
            as_json=options["json"],
            headings=AGENT_HEADINGS,
            row=agent_row,
            empty=empty,
        )
