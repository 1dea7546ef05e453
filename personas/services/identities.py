"""The owner's identity chain, which every card of theirs names as its provider.

Changing it owes every persona of the owner a new settling, queued by name. The OpenID Connect
issuer and subject in it are written here only for a pair a verified ID token proved
(personas.oidc verifies the token; `identity_signin` applies the account rule, `identity_proven`
records the proof), never from what an owner typed.
"""

import hashlib
import re
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from personas import audit
from personas.models import AuditEvent, OrganizationDomain, OwnerIdentity, Persona
from personas.services.derivation import _identity_of
from personas.services.generations import SETTLE_PERSONA
from virgo.queueing import queue_after_commit

# What an owner writes of their identity; everything else in it is proven, never typed.
OWNER_FIELDS = frozenset({"display_name", "organization_domain"})


@transaction.atomic
def owner_identity_update(*, user: AbstractBaseUser, **fields: Any) -> OwnerIdentity:
    """Change what the owner may: their display name and which proven domain their cards name.

    The OIDC issuer and subject are not the owner's to write (identity_proven writes them from a
    verified ID token), and a domain is named only while proven for them (VX-ID-2, VX-ID-4).
    """
    unknown = set(fields) - OWNER_FIELDS
    if unknown:
        raise ValidationError({name: "not the owner's to write" for name in sorted(unknown)})
    domain = fields.get("organization_domain")
    if domain is not None:
        # Judged as stored, never as the caller's copy says: a copy read before an approval
        # would refuse it, one read before a lapse would let a lapsed domain through.
        domain = fields["organization_domain"] = OrganizationDomain.objects.get(pk=domain.pk)
    if domain is not None and not domain.may_be_named_by(user):
        raise ValidationError(
            {
                "organization_domain": (
                    f"{domain.domain} is not proven for you: publish its token, "
                    "or ask its owner to share it"
                )
            }
        )
    identity = _identity_of(user)
    for field, value in fields.items():
        setattr(identity, field, value)
    identity.full_clean()
    identity.save()
    _settle_personas_of(user)
    return identity


def _settle_personas_of(user: AbstractBaseUser) -> None:
    for persona_id in Persona.objects.owned_by(user).values_list("pk", flat=True):
        queue_after_commit(SETTLE_PERSONA, persona_id)


# OwnerIdentity's own bounds: identity_issuer is a URLField of 200, identity_subject 255
# (OpenID Connect asks subjects to stay within 255 ASCII characters).
ISSUER_LIMIT = 200
SUBJECT_LIMIT = 255
DISPLAY_NAME_LIMIT = 200
TAKEN = (
    "This OpenID Connect identity is already linked to another Virgo account: it signs in to "
    "that account and cannot be linked to a second one."
)
# A username for an owner an OpenID Connect sign-in made: the issuer's host and a digest of the
# pair, within the characters and length Django's usernames allow.
_USERNAME_UNSAFE = re.compile(r"[^\w.@+-]")


def linked_user(*, issuer: str, subject: str) -> Any | None:
    """The account a verified (issuer, subject) signs in to, if any is linked to it."""
    identity = (
        OwnerIdentity.objects.filter(
            identity_issuer=issuer,
            identity_subject=subject,
            identity_verified_at__isnull=False,
        )
        .select_related("user")
        .first()
    )
    return identity.user if identity is not None else None


@transaction.atomic
def identity_proven(*, user: AbstractBaseUser, issuer: str, subject: str) -> OwnerIdentity:
    """A verified ID token proved (`issuer`, `subject`) for `user`: record it (VX-ID-1).

    The first proof sets `identity_verified_at`; a later sign-in with the same pair leaves the
    identity as it is, so no card changes for it. A pair that proves another identity than the
    one on record (the owner linked another) replaces it, since now. Either change is audited
    and owes every persona of the owner a new settling, so their cards name the proven pair. A
    pair already proven for another account is refused (VX-ID-4): it is theirs.
    """
    _check_pair(issuer, subject)
    taken = {"identity_subject": TAKEN}
    if (
        OwnerIdentity.objects.filter(
            identity_issuer=issuer, identity_subject=subject, identity_verified_at__isnull=False
        )
        .exclude(user=user)
        .exists()
    ):
        raise ValidationError(taken)
    identity = OwnerIdentity.objects.select_for_update().filter(user=user).first()
    if identity is None:
        identity = OwnerIdentity(user=user, display_name=_default_display_name(user))
    elif identity.subject_verified and (identity.identity_issuer, identity.identity_subject) == (
        issuer,
        subject,
    ):
        return identity
    replaced = (
        {"issuer": identity.identity_issuer, "subject": identity.identity_subject}
        if identity.subject_verified
        else None
    )
    identity.identity_issuer = issuer
    identity.identity_subject = subject
    identity.identity_verified_at = timezone.now()
    identity.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():
            identity.save()
    except IntegrityError:
        # Another sign-in proved the same pair for another account in the meantime.
        raise ValidationError(taken) from None
    audit.record(
        AuditEvent.Kind.IDENTITY_LINKED,
        actor=user,
        data={"issuer": issuer, "subject": subject, "replaced": replaced},
    )
    _settle_personas_of(user)
    return identity


class Admission(StrEnum):
    """What an issuer's admission rule says of a pair no account has (VX-ID-5)."""

    ADMITTED = "admitted"
    AWAITS_APPROVAL = "awaits-approval"
    REFUSED = "refused"


class NotAdmitted(ValidationError):
    """A pair with no account, from an issuer whose rule admits no new account for it."""


def identity_signin(
    *, issuer: str, subject: str, admission: Admission, display_name: str = ""
) -> Any:
    """The account rule of an OpenID Connect sign-in whose ID token proved (issuer, subject).

    A pair linked to an account signs in to that account. Any other pair gets an account of its
    own only as the issuer's admission rule says (VX-ID-5, personas.oidc.admission_of): a new
    staff owner, named after the issuer's host and a digest of the pair, without a usable
    password, whose identity carries `display_name` (the token's name claim) and the proven pair;
    inactive, until a superuser makes it active, where the rule asks for approval; none at all
    where it refuses (NotAdmitted). Nothing else is matched: an account with the same e-mail
    address, or the same name, is never taken over; a password owner links a pair only by
    signing in first and linking it (identity_proven through personas.oidc's link flow).
    """
    _check_pair(issuer, subject)
    found = linked_user(issuer=issuer, subject=subject)
    if found is not None:
        return found
    if admission is Admission.REFUSED:
        refusal = (
            "this identity has no account here, and its issuer admits no new one: ask an "
            "administrator to add you"
        )
        raise NotAdmitted({"identity": refusal})
    try:
        with transaction.atomic():
            return _new_owner(
                issuer=issuer,
                subject=subject,
                display_name=display_name,
                active=admission is Admission.ADMITTED,
            )
    except (ValidationError, IntegrityError):
        # A sign-in of the same pair made its account first: that one is the pair's.
        found = linked_user(issuer=issuer, subject=subject)
        if found is None:
            raise
        return found


def _new_owner(*, issuer: str, subject: str, display_name: str, active: bool) -> Any:
    users = get_user_model()
    base = _username_for(issuer, subject)
    username, n = base, 1
    while users.objects.filter(username__iexact=username).exists():
        n += 1
        username = f"{base}-{n}"
    user = users.objects.create_user(
        username=username, password=None, is_staff=True, is_active=active
    )
    OwnerIdentity.objects.create(
        user=user,
        display_name=(display_name.strip() or username)[:DISPLAY_NAME_LIMIT],
    )
    identity_proven(user=user, issuer=issuer, subject=subject)
    return user


def _username_for(issuer: str, subject: str) -> str:
    host = _USERNAME_UNSAFE.sub("-", urlsplit(issuer).hostname or "oidc")[:100]
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:16]
    return f"{host}-{digest}"


def _check_pair(issuer: str, subject: str) -> None:
    if not isinstance(issuer, str) or not issuer or len(issuer) > ISSUER_LIMIT:
        raise ValidationError({"identity_issuer": "an issuer URL of at most 200 characters"})
    if not isinstance(subject, str) or not subject or len(subject) > SUBJECT_LIMIT:
        raise ValidationError({"identity_subject": "a subject of 1 to 255 characters"})


def _default_display_name(user: AbstractBaseUser) -> str:
    full_name = getattr(user, "get_full_name", lambda: "")()
    return (full_name or user.get_username())[:DISPLAY_NAME_LIMIT]
