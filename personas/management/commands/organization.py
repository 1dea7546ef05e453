"""`virgo organization check [--all | DOMAIN]`, `virgo organization list`: organization domains.

`check DOMAIN` looks for the proof of every claim on DOMAIN now, as an owner's "Verify now"
does; `check --all` of every claim a check can settle (all but the ones a superuser approved),
as the scheduled recheck does for the verified ones. Each claim is one line; the exit status is
1 when any claim is left unverified. `approve DOMAIN --owner USERNAME` is the installation
vouching for one owner's claim (audited, as a superuser's approval is).
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas import proofs, services
from personas.models import OrganizationDomain, Verification


def describe(claim: OrganizationDomain) -> str:
    who = f"{claim.domain} (owner {claim.owner.get_username()})"
    if claim.is_verified:
        return f"{who}: verified, {Verification(claim.verification).label}"
    return f"{who}: not verified: {claim.last_failure or 'not checked yet'}"


class Command(BaseCommand):
    help = "Check, list or approve the organization domains owners claim for their cards."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        check = actions.add_parser("check", help="Look for the proofs now and record them.")
        which = check.add_mutually_exclusive_group(required=True)
        which.add_argument("domain", nargs="?", help="every claim on this domain")
        which.add_argument("--all", action="store_true", help="every claim but the approved ones")
        actions.add_parser("list", help="Every claim: domain, owner, standing.")
        approve = actions.add_parser("approve", help="Approve one owner's claim by hand.")
        approve.add_argument("domain", help="the domain the owner claimed")
        approve.add_argument(
            "--owner", required=True, metavar="USERNAME", help="the owner whose claim it is"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        claims = OrganizationDomain.objects.select_related("owner").order_by("domain", "pk")
        action = options["action"]
        if action == "list":
            for claim in claims:
                self.stdout.write(describe(claim))
            return
        domain = self._domain(options.get("domain"))
        if action == "approve":
            claim = claims.filter(domain=domain, owner__username=options["owner"]).first()
            if claim is None:
                raise CommandError(f"{options['owner']} has no claim on {domain}")
            try:
                claim = services.organization_approve(claim=claim, actor=services.INSTALLATION)
            except ValidationError as refused:
                raise CommandError(" ".join(refused.messages)) from None
            self.stdout.write(describe(claim))
            return
        if options["all"]:
            chosen = claims.exclude(verification=Verification.OPERATOR)
        else:
            chosen = claims.filter(domain=domain)
            if not chosen.exists():
                raise CommandError(f"nobody claims {domain}")
        if not chosen.exists():
            self.stdout.write("no claim to check: every claim is approved, or there is none")
            return
        unverified = 0
        for claim in chosen:
            checked = proofs.check_domain(claim)
            unverified += not checked.is_verified
            self.stdout.write(describe(checked))
        if unverified:
            raise CommandError(f"{unverified} claim(s) not verified", returncode=1)

    def _domain(self, text: str | None) -> str:
        if text is None:
            return ""
        try:
            return services.normalise_domain(text)
        except ValidationError as refused:
            raise CommandError(f"domain: {' '.join(refused.messages)}") from None
