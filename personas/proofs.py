"""Checking that an owner controls the domain they claim (VX-ID-2).

The owner publishes their claim's token in one of two places, and `check_domain` looks in this
order:

1. a DNS TXT record at `_virgo-challenge.<domain>` holding `virgo-domain-verification=<token>`
   (asked of the servers VIRGO_DNS_NAMESERVERS names, or the system's);
2. the file `https://<domain>/.well-known/virgo-domain-verification.txt` holding the token alone,
   fetched through the outbound guard (virgo.outbound: the checked address, pinned, with the
   name kept for TLS and Host; no redirect followed, a bounded body, a short time).

What it finds is recorded through the services: `organization_proven` with the way it was found,
or `organization_lapsed` with one line saying why neither held. Nothing a stranger's server or
DNS sends is copied into that line, and no token is; nothing raises to the caller but
PermissionDenied (the actor may not check this claim).
"""

import logging
import ssl
from dataclasses import dataclass
from typing import Any

import httpx
from django.core.exceptions import PermissionDenied, ValidationError

from personas.models import OrganizationDomain, Verification
from personas.services import organization_lapsed, organization_proven
from virgo import outbound, resolvers

logger = logging.getLogger(__name__)

TXT_PREFIX = "_virgo-challenge"
TXT_VALUE_PREFIX = "virgo-domain-verification="
WELL_KNOWN_PATH = "/.well-known/virgo-domain-verification.txt"
# The port the well-known file is fetched from: HTTPS's. The tests point it at their server.
WELL_KNOWN_PORT = 443
# Each way of proving gets this long in all (both address families, or the whole body).
PROOF_SECONDS = 5.0
# The file holds a token of 32 characters and perhaps a line end: anything longer is not it.
WELL_KNOWN_LIMIT = 1024
# How far down an error's causes a TLS failure is looked for (httpx wraps httpcore wraps ssl).
CAUSE_DEPTH = 8


@dataclass(frozen=True, slots=True)
class Instructions:
    """What the owner publishes to prove a claim, in one of the two places."""

    txt_name: str
    txt_value: str
    url: str
    file_content: str


def instructions(claim: OrganizationDomain) -> Instructions:
    return Instructions(
        txt_name=txt_name(claim.domain),
        txt_value=f"{TXT_VALUE_PREFIX}{claim.token}",
        url=well_known_url(claim.domain),
        file_content=claim.token,
    )


def txt_name(domain: str) -> str:
    return f"{TXT_PREFIX}.{domain}"


def well_known_url(domain: str) -> str:
    port = "" if WELL_KNOWN_PORT == 443 else f":{WELL_KNOWN_PORT}"
    return f"https://{domain}{port}{WELL_KNOWN_PATH}"


def may_check(actor: Any, claim: OrganizationDomain) -> bool:
    """The claim's owner checks it, and so may a superuser; nobody else (VX-ID-4)."""
    if not (actor.is_authenticated and actor.is_active):
        return False
    return claim.owner_id == actor.pk or bool(actor.is_superuser)


def check_domain(claim: OrganizationDomain, *, actor: Any = None) -> OrganizationDomain:
    """Look for the claim's proof now and record what was found; the claim as it then stands.

    `actor` is who asked (None: the installation, e.g. the scheduled recheck). A claim a
    superuser approved is left as it is: approval is not a proof a check could find missing.
    """
    if actor is not None and not may_check(actor, claim):
        raise PermissionDenied("only the domain's owner or a superuser may check its proof")
    claim = OrganizationDomain.objects.get(pk=claim.pk)
    if claim.verification == Verification.OPERATOR:
        return claim
    taken = (
        OrganizationDomain.objects.filter(domain=claim.domain, verified_at__isnull=False)
        .exclude(pk=claim.pk)
        .exists()
    )
    if taken:
        return organization_lapsed(claim=claim, reason=_taken(claim))
    failures = []
    for verification, look in (
        (Verification.DNS_TXT, _dns_problem),
        (Verification.HTTPS_WELL_KNOWN, _well_known_problem),
    ):
        problem = _guarded(look, claim)
        if problem is None:
            try:
                return organization_proven(claim=claim, verification=verification)
            except ValidationError:
                # Proven by another owner between the look above and now.
                return organization_lapsed(claim=claim, reason=_taken(claim))
        failures.append(f"{verification.label}: {problem}")
    return organization_lapsed(claim=claim, reason="; ".join(failures))


def _taken(claim: OrganizationDomain) -> str:
    return f"{claim.domain} is proven by another owner; ask them to share it with you"


def _guarded(look: Any, claim: OrganizationDomain) -> str | None:
    """The problem `look` found; whatever else goes wrong is a problem too, never a traceback."""
    try:
        problem: str | None = look(claim)
    except Exception as error:
        logger.warning("organization proof: checking %s failed", claim.domain, exc_info=True)
        return f"the check failed ({type(error).__name__})"
    return problem


def _dns_problem(claim: OrganizationDomain) -> str | None:
    """Why the TXT record does not prove the claim, or None when it does."""
    name = txt_name(claim.domain)
    try:
        records = resolvers.answers(name, "TXT", lifetime=PROOF_SECONDS)
    except resolvers.LookupFailed as failed:
        return f"{name}: {failed}"
    # A TXT record may be split into strings of 255 bytes; its value is them joined.
    values = [b"".join(record.strings).decode("utf-8", "replace").strip() for record in records]
    ours = [value for value in values if value.startswith(TXT_VALUE_PREFIX)]
    if f"{TXT_VALUE_PREFIX}{claim.token}" in ours:
        return None
    if ours:
        return f"the TXT record at {name} holds another token, not this claim's"
    if values:
        return f"no TXT record at {name} starts with {TXT_VALUE_PREFIX}"
    return f"no TXT record at {name}"


def _well_known_problem(claim: OrganizationDomain) -> str | None:
    """Why the well-known file does not prove the claim, or None when it does."""
    url = well_known_url(claim.domain)
    try:
        fetched = outbound.fetch(url, what=url, timeout=PROOF_SECONDS, limit=WELL_KNOWN_LIMIT)
    except outbound.DestinationRefused as refused:
        # "<url>: <host> is a loopback address; ..." names the URL once already.
        return str(refused)
    except outbound.TooLarge:
        return f"{url}: longer than {WELL_KNOWN_LIMIT} bytes, so not the token"
    except httpx.TimeoutException:
        return f"{url}: no whole answer within {PROOF_SECONDS:g} s"
    except httpx.HTTPError as error:
        return f"{url}: {_wire_problem(error)}"
    if 300 <= fetched.status < 400:
        return f"{url}: answered HTTP {fetched.status}; redirects are not followed"
    if fetched.status != 200:
        return f"{url}: answered HTTP {fetched.status}"
    if fetched.body.strip() != claim.token.encode("ascii"):
        return f"{url}: the file does not hold this claim's token"
    return None


def _wire_problem(error: httpx.HTTPError) -> str:
    """The connection's failure in words, TLS ones named as such (never the server's bytes)."""
    cause: BaseException | None = error
    for _ in range(CAUSE_DEPTH):
        if cause is None:
            break
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or cause.reason or "no reason given"
            return f"TLS failed: its certificate could not be verified ({detail})"
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or type(cause).__name__})"
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, httpx.ConnectError):
        return "could not connect"
    return f"could not be fetched ({type(error).__name__})"
