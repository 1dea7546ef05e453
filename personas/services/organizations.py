"""Organization domains: claimed by an owner, proven (or approved), shared, lapsed (VX-ID-2).

A card names an organization only while its domain is proven, so every change of a domain's
standing owes a new settling to each persona whose card names it (or would): the owner's, and
those of the owners it is shared with. How a proof is checked (DNS, HTTPS) is not here: these
functions record what a check found.
"""

from typing import Any

import idna
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from personas import audit
from personas.models import AuditEvent, OrganizationDomain, Persona, Verification
from personas.services.generations import SETTLE_PERSONA
from virgo.queueing import queue_after_commit

DOMAIN_LIMIT = 253
FAILURE_LIMIT = 500


class Installation:
    """The operator acting through a command on the server (load_demo, a shell): no account."""

    pk = None
    is_superuser = True


INSTALLATION = Installation()


def normalise_domain(text: str) -> str:
    """The domain as stored: IDNA A-labels, lower case, no trailing dot; or a field error."""
    candidate = text.strip().rstrip(".")
    if not candidate or any(mark in candidate for mark in ":/@ "):
        raise ValidationError(
            {"domain": "write a registered domain name such as example.org (no scheme or path)"}
        )
    # idna refuses every label DNS would: empty, over 63 octets, a hyphen at either end, a
    # character outside letters, digits and hyphens (an underscore, a space, a star).
    try:
        ascii_form = idna.encode(candidate, uts46=True).decode("ascii").lower()
    except idna.IDNAError as error:
        raise ValidationError({"domain": f"not a domain name: {error}"}) from None
    labels = ascii_form.split(".")
    if len(labels) < 2 or len(ascii_form) > DOMAIN_LIMIT:
        raise ValidationError(
            {"domain": "write a registered domain name such as example.org (no scheme or path)"}
        )
    if labels[-1].isdigit():
        raise ValidationError({"domain": "an IP address is not an organization's domain"})
    return ascii_form


@transaction.atomic
def organization_claim(*, owner: AbstractBaseUser, domain: str) -> OrganizationDomain:
    """The owner's claim on a domain, with the token they publish to prove it (made once)."""
    name = normalise_domain(domain)
    holder = OrganizationDomain.objects.filter(domain=name, verified_at__isnull=False).first()
    if holder is not None and holder.owner_id != owner.pk:
        raise ValidationError({"domain": _taken(name)})
    claim, _ = OrganizationDomain.objects.get_or_create(owner=owner, domain=name)
    return claim


def _taken(domain: str) -> str:
    return f"{domain} is proven by another owner; ask them to share it with you"


def _republish(claim: OrganizationDomain) -> None:
    """Settle again every persona whose card names, or would name, this domain."""
    owners = [claim.owner_id, *claim.shared_with.values_list("pk", flat=True)]
    for persona_id in Persona.objects.filter(agent__owner__in=owners).values_list("pk", flat=True):
        queue_after_commit(SETTLE_PERSONA, persona_id)


@audit.action
@transaction.atomic
def organization_proven(
    *, claim: OrganizationDomain, verification: Verification
) -> OrganizationDomain:
    """A check found the proof: the domain is verified (since now, or since it already was).

    Another owner's verified claim on the same domain refuses it: a proven domain belongs to
    one owner, who may share it. The claim says how it is proven now: a check that finds the
    proof the other way (the TXT record gone, the file there) says so, and an operator's
    approval stays an approval, which no check can find missing.
    """
    claim = OrganizationDomain.objects.select_for_update().get(pk=claim.pk)
    now = timezone.now()
    newly = claim.verified_at is None
    claim.checked_at = now
    claim.last_failure = ""
    if newly:
        claim.verified_at = now
    how_changed = claim.verification != verification and (
        newly or claim.verification != Verification.OPERATOR
    )
    if how_changed:
        claim.verification = verification
    try:
        with transaction.atomic():
            claim.save()
    except IntegrityError:
        raise ValidationError({"domain": _taken(claim.domain)}) from None
    if newly:
        audit.record(
            AuditEvent.Kind.ORGANIZATION_VERIFIED,
            actor=claim.owner,
            data={
                "domain": claim.domain,
                "owner": claim.owner_id,
                "owner_name": claim.owner.get_username(),
                "verification": verification.value,
            },
        )
    if how_changed:
        # The card says how the domain was proven.
        _republish(claim)
    return claim


@audit.action
@transaction.atomic
def organization_approve(*, claim: OrganizationDomain, actor: Any) -> OrganizationDomain:
    """A superuser, or the installation itself, vouches for the claim by hand (`operator`)."""
    installation = actor is INSTALLATION
    if not installation and not (
        getattr(actor, "is_authenticated", False) and getattr(actor, "is_superuser", False)
    ):
        raise PermissionDenied("only a superuser may approve an organization domain")
    claim = organization_proven(claim=claim, verification=Verification.OPERATOR)
    audit.record(
        AuditEvent.Kind.ORGANIZATION_APPROVED,
        actor=None if installation else actor,
        data={
            "domain": claim.domain,
            "owner": claim.owner_id,
            "owner_name": claim.owner.get_username(),
            "by": "installation" if installation else "superuser",
        },
    )
    return claim


@transaction.atomic
def organization_lapsed(*, claim: OrganizationDomain, reason: str) -> OrganizationDomain:
    """A check no longer finds the proof: the domain is unverified until proven again."""
    claim = OrganizationDomain.objects.select_for_update().get(pk=claim.pk)
    was_verified = claim.verified_at is not None
    claim.checked_at = timezone.now()
    claim.last_failure = reason[:FAILURE_LIMIT]
    if was_verified and claim.verification == Verification.OPERATOR:
        # An operator's approval is no proof a check can find missing.
        claim.save(update_fields=["checked_at", "last_failure"])
        return claim
    claim.verified_at = None
    claim.verification = Verification.UNVERIFIED
    claim.save(update_fields=["checked_at", "last_failure", "verified_at", "verification"])
    if was_verified:
        audit.record(
            AuditEvent.Kind.ORGANIZATION_LAPSED,
            actor=None,
            data={
                "domain": claim.domain,
                "owner": claim.owner_id,
                "owner_name": claim.owner.get_username(),
                "reason": claim.last_failure,
            },
        )
        _republish(claim)
    return claim


@transaction.atomic
def organization_share(
    *, claim: OrganizationDomain, with_user: AbstractBaseUser, actor: Any
) -> OrganizationDomain:
    """Let another owner's cards name this domain too: its owner's or a superuser's decision.

    Only a verified domain is shared (sharing vouches for it), and never with its own owner.
    """
    if claim.owner_id != actor.pk and not getattr(actor, "is_superuser", False):
        raise PermissionDenied("only the domain's owner or a superuser may share it")
    claim = OrganizationDomain.objects.select_for_update().get(pk=claim.pk)
    if not claim.is_verified:
        raise ValidationError(
            {"domain": f"{claim.domain} is not proven yet: share it once it is verified"}
        )
    if with_user.pk == claim.owner_id:
        raise ValidationError({"shared_with": f"{with_user} owns {claim.domain} already"})
    claim.shared_with.add(with_user)
    audit.record(
        AuditEvent.Kind.ORGANIZATION_SHARED,
        actor=None if actor is INSTALLATION else actor,
        data={
            "domain": claim.domain,
            "owner": claim.owner_id,
            "owner_name": claim.owner.get_username(),
            "with": with_user.pk,
            "with_name": with_user.get_username(),
        },
    )
    _republish(claim)
    return claim


@transaction.atomic
def organization_remove(*, claim: OrganizationDomain, actor: Any) -> None:
    """Withdraw a claim (its owner, or a superuser): no card names the domain any longer, and
    those of the owners it was shared with are settled again too."""
    if claim.owner_id != actor.pk and not getattr(actor, "is_superuser", False):
        raise PermissionDenied("only the domain's owner or a superuser may remove it")
    claim = OrganizationDomain.objects.select_for_update().get(pk=claim.pk)
    _republish(claim)  # listed before the delete clears who it was shared with
    claim.delete()
