"""`virgo cards base-url | move-base-url URL`: the installation's public base URL (VX-SCALE-4).

Every machine must run with the URL the installation recorded (cards.base_url). `base-url`
shows it beside this process's VIRGO_PUBLIC_BASE_URL; `move-base-url` is the deliberate move:
the new URL is recorded at once (audited), every machine still on the old one stops publishing
and answers /readyz 503, and the cards are published again under the new one by the workers
that run with it (`virgo reconcile` on such a machine does it at once).
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cards import base_url


class Command(BaseCommand):
    help = "Show the installation's public base URL, or move every card to a new one."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser(
            "base-url", help="The recorded public base URL and this process's, side by side."
        )
        actions.add_parser(
            "move-base-url",
            help="Record URL as the public base URL and publish every card again under it.",
        ).add_argument(
            "url", metavar="URL", help="the new public base URL, e.g. https://virgo.example.org"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "base-url":
            self._show()
            return
        try:
            move = base_url.move_base_url(url=options["url"])
        except ValueError as problem:
            raise CommandError(f"{options['url']!r} is not a public base URL: {problem}") from None
        if not move.moved:
            self.stdout.write(f"the public base URL is {move.after} already: nothing to move")
        elif move.before is None:
            self.stdout.write(f"recorded {move.after} as the public base URL")
        else:
            self.stdout.write(
                f"moved the public base URL from {move.before} to {move.after}: every machine "
                f"needs VIRGO_PUBLIC_BASE_URL={move.after}; its workers publish every card again "
                "(`virgo reconcile` on one of them does it at once)"
            )
        if move.after != settings.VIRGO_PUBLIC_BASE_URL:
            self.stderr.write(
                f"this process runs with VIRGO_PUBLIC_BASE_URL={settings.VIRGO_PUBLIC_BASE_URL}:"
                " it publishes nothing until it is given the new URL"
            )

    def _show(self) -> None:
        recorded = base_url.recorded_base_url()
        self.stdout.write(
            f"installation: {recorded or 'none recorded yet (the first card records it)'}"
        )
        self.stdout.write(f"this process: {settings.VIRGO_PUBLIC_BASE_URL}")
