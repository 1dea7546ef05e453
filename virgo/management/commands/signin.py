"""`virgo signin unlock --username NAME | --address ADDRESS`: lift a sign-in lockout at once.

Lockouts end by themselves when their window does (VIRGO_SIGNIN_LOCKOUT_SECONDS); this is for
the owner who cannot wait. It works in every mode: it starts a new generation of the budget's
count where every process of the installation reads it (virgo.signin), in the shared cache
(Redis) or, in the embedded default, under VIRGO_HOME. Only with Redis does it see the counts
too and say how many failures it lifted; the embedded server keeps them in its own memory.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from virgo import signin


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
        shared = signin.counts_shared()
        for budget in budgets:
            try:
                failures = signin.lift(budget)
            except (signin.Unavailable, *signin.CACHE_ERRORS) as error:
                raise CommandError(self._not_lifted(shared, error)) from None
            shown = username if budget.kind == signin.USERNAME else budget.value
            if not shared:
                # The embedded server counts in its own memory, out of this process's sight.
                self.stdout.write(
                    f"Lifted {budget.kind} {shown!r}: the server counts its failed sign-ins "
                    "from zero again."
                )
                continue
            state = "was locked out" if failures >= budget.limit else "was not locked out"
            self.stdout.write(
                f"Lifted {budget.kind} {shown!r}: {failures} failed sign-in"
                f"{'' if failures == 1 else 's'} in this window ({state})."
            )

    @staticmethod
    def _not_lifted(shared: bool, error: Exception) -> str:
        if shared:
            return (
                "Redis, where the sign-in counts live, cannot be reached: nothing was lifted. "
                "Try again once it answers (sign-in answers 503 until then)."
            )
        return (
            f"the sign-in generations under VIRGO_HOME cannot be written ({error}): nothing was "
            "lifted. Run this as the server's user, with its VIRGO_HOME."
        )
