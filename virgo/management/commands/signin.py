"""`virgo signin unlock --username NAME | --address ADDRESS`: lift a sign-in lockout at once.

Lockouts end by themselves when their window does (VIRGO_SIGNIN_LOCKOUT_SECONDS); this is for
the owner who cannot wait. The counts live in the shared cache (Redis), so the command reaches
what every web process sees. Without one (the embedded default) they live in the server
process's own memory, which no other process can reach: restarting the server lifts them all.
"""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from virgo import signin
from virgo.checks import SHARED_CACHES


class Command(BaseCommand):
    help = "Lift a sign-in lockout (too many failed passwords) for a username or an address."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        unlock = actions.add_parser(
            "unlock", help="lift the lockout of a username, an address, or both"
        )
        unlock.add_argument("--username", help="the username whose sign-in is paused")
        unlock.add_argument("--address", help="the client address whose sign-ins are paused")

    def handle(self, *args: Any, **options: Any) -> None:
        username, address = options["username"], options["address"]
        if username is None and address is None:
            raise CommandError("name what to unlock: --username NAME and/or --address ADDRESS")
        budgets = []
        if username is not None:
            budgets.append(signin.Budget(signin.USERNAME, signin.normal_username(username)))
        if address is not None:
            try:
                budgets.append(signin.Budget(signin.ADDRESS, signin.normal_address(address)))
            except ValueError:
                raise CommandError(f"--address: {address!r} is not an IP address") from None
        backend = settings.CACHES[settings.RATELIMIT_USE_CACHE]["BACKEND"]
        if backend not in SHARED_CACHES:
            raise CommandError(
                "sign-in counts live in the server process's own memory here (no REDIS_URL), "
                "out of this command's reach: restart the server to lift every lockout, or wait "
                f"at most {settings.VIRGO_SIGNIN_LOCKOUT_SECONDS} seconds"
            )
        for budget in budgets:
            try:
                failures = signin.lift(budget)
            except (signin.Unavailable, *signin.CACHE_ERRORS):
                raise CommandError(
                    "Redis, where the sign-in counts live, cannot be reached: nothing was "
                    "lifted. Try again once it answers (sign-in answers 503 until then)."
                ) from None
            shown = username if budget.kind == signin.USERNAME else budget.value
            state = "was locked out" if failures >= budget.limit else "was not locked out"
            self.stdout.write(
                f"Lifted {budget.kind} {shown!r}: {failures} failed sign-in"
                f"{'' if failures == 1 else 's'} in this window ({state})."
            )
