"""`virgo keys create | list | rotate | retire <kid> | revoke <kid> | rewrap`: the keys that sign
cards. `rewrap` seals every key that signs under the current key-encryption key (the first of
VIRGO_KEY_ENCRYPTION_KEY), after which an older one may be removed from every machine.

A rotation or a revocation commits at once (the JWKS answers the new set on its next request);
re-signing every card follows through Celery, and `virgo reconcile` finishes what a worker left.
Nothing printed ever holds a private key: only kids, algorithms, states and dates.
"""

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cards import keys, sealing
from cards.models import PublishedCard, SigningKey


class Command(BaseCommand):
    help = "Create, list, rotate, retire, revoke or rewrap the keys that sign Virgo's cards."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        """A kid is a base64url thumbprint and may begin with `-`: after `retire` and `revoke`
        it is taken as the kid, not as an option, so a kid copied from `keys list` just works."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse = parser.parse_args

        def parse_args(args: Any = None, namespace: Any = None) -> Any:
            given = list(sys.argv[2:] if args is None else args)
            if (
                len(given) >= 2
                and given[0] in ("retire", "revoke")
                and given[1].startswith("-")
                and given[1] not in ("-h", "--help", "--")
            ):
                given.insert(1, "--")
            return parse(given, namespace)

        parser.parse_args = parse_args  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        for name, text in (
            ("create", "Make the first signing key (made by itself on the first card otherwise)."),
            ("rotate", "Make a new active key; the old one signs beside it for the grace period."),
        ):
            action = actions.add_parser(name, help=text)
            action.add_argument(
                "--algorithm", choices=["ES256", "EdDSA"], help="default VIRGO_SIGNING_ALGORITHM"
            )
            action.add_argument(
                "--import",
                dest="import_from",
                type=Path,
                metavar="FILE",
                help="use the PEM private key in FILE (owner-private, 0600) instead of a new one",
            )
        actions.add_parser("list", help="Every key: kid, algorithm, state, dates, cards signed.")
        actions.add_parser(
            "rewrap",
            help="Seal every signing key under the current key-encryption key (the first of "
            "VIRGO_KEY_ENCRYPTION_KEY), and any key still only in a file here.",
        )
        for name, text in (
            ("retire", "End a retiring key's grace now: out of the JWKS, off every card."),
            ("revoke", "Withdraw a key at once (a new one replaces an active key)."),
        ):
            actions.add_parser(name, help=text).add_argument(
                "kid", help="the key's id, as `keys list` shows it"
            )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            self._list()
            return
        if action == "rewrap":
            self._rewrap()
            return
        try:
            if action == "create":
                key = keys.create_key(
                    algorithm=options["algorithm"], import_from=options["import_from"]
                )
                self.stdout.write(f"created {key.kid} ({key.algorithm}): it signs every card")
            elif action == "rotate":
                key = keys.rotate(
                    algorithm=options["algorithm"], import_from=options["import_from"]
                )
                self.stdout.write(
                    f"rotated: {key.kid} ({key.algorithm}) is active; the keys it replaces sign "
                    f"beside it until {self._retiring_until()}; every card is being re-signed "
                    "(`virgo reconcile` finishes it if no worker runs)"
                )
            elif action == "retire":
                key = keys.retire(options["kid"])
                self.stdout.write(f"retired {key.kid}: it left the JWKS and signs nothing")
            else:
                key = keys.revoke(options["kid"])
                active = SigningKey.objects.get(state=SigningKey.State.ACTIVE)
                self.stdout.write(
                    f"revoked {key.kid}: it left the JWKS; every card it signed is being "
                    f"re-signed (active key {active.kid})"
                )
        except keys.KeyRefused as refused:
            raise CommandError(str(refused)) from None

    def _retiring_until(self) -> str:
        retiring = SigningKey.objects.filter(state=SigningKey.State.RETIRING)
        latest = max((key.retire_after for key in retiring if key.retire_after), default=None)
        return latest.isoformat(timespec="seconds") if latest else "now"

    def _list(self) -> None:
        rows = list(SigningKey.objects.all())
        if not rows:
            self.stdout.write("no signing key yet: the first card published makes one")
            return
        markers = PublishedCard.objects.values_list("signed_by", flat=True)
        signed: dict[str, int] = {}
        for marker in markers.iterator():
            for kid in marker.split():
                signed[kid] = signed.get(kid, 0) + 1
        for key in rows:
            until = f" retire-after {key.retire_after:%Y-%m-%d %H:%M}Z" if key.retire_after else ""
            self.stdout.write(
                f"{key.kid}  {key.algorithm:<5}  {key.state:<8}  created "
                f"{key.created_at:%Y-%m-%d %H:%M}Z{until}  cards {signed.get(key.kid, 0)}"
            )

    def _rewrap(self) -> None:
        try:
            done = keys.rewrap()
        except sealing.KeyCannotBeOpened as refused:
            raise CommandError(str(refused)) from None
        current = sealing.current_fingerprint()
        for kid in done.resealed:
            self.stdout.write(f"{kid}: sealed again under key-encryption key {current}")
        for kid in done.sealed_from_file:
            self.stdout.write(f"{kid}: sealed from its file under key-encryption key {current}")
        for kid in done.current:
            self.stdout.write(f"{kid}: under key-encryption key {current} already")
        for kid, why in done.left:
            self.stderr.write(f"{kid}: left as it was: {why}")
        if done.left:
            raise CommandError(
                f"{len(done.left)} signing key(s) could not be sealed under {current}; keep the "
                "key-encryption keys they need until they are"
            )
