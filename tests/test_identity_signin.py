"""The account rule of an OpenID Connect sign-in (personas.services.identity_signin), called as
personas.oidc calls it once a real provider's ID token has verified (tests/test_oidc.py drives
the whole flow against a provider process); here the rule alone, for every branch of it."""

import hashlib

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from personas import services
from personas.models import AuditEvent, OwnerIdentity
from personas.services import identities
from tests.factories import make_owner

pytestmark = pytest.mark.django_db

User = get_user_model()
ISSUER = "https://id.example.net/realms/virgo"
ADMITTED = services.Admission.ADMITTED


def username_for(issuer: str, subject: str, host: str = "id.example.net") -> str:
    return f"{host}-{hashlib.sha256(f'{issuer}\n{subject}'.encode()).hexdigest()[:16]}"


def test_a_new_pair_gets_a_staff_owner_of_its_own_without_a_password() -> None:
    """VX-ID-1: an unlinked pair makes a new staff owner named after the issuer's host and a
    digest of the pair, with no usable password, whose identity is the proven pair and the
    token's name."""
    user = services.identity_signin(
        admission=ADMITTED, issuer=ISSUER, subject="s-1", display_name="  Dana  "
    )
    assert user.username == username_for(ISSUER, "s-1")
    assert (user.is_staff, user.is_superuser, user.has_usable_password()) == (True, False, False)
    identity = OwnerIdentity.objects.get(user=user)
    assert (identity.display_name, identity.identity_issuer) == ("Dana", ISSUER)
    assert identity.identity_subject == "s-1"
    assert identity.identity_verified_at is not None
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED, actor=user).count() == 1


def test_a_nameless_token_names_the_owner_after_the_account_and_a_long_name_is_cut() -> None:
    """VX-ID-1: a token without a name claim leaves the account's name as the display name;
    one longer than the field keeps its first 200 characters."""
    nameless = services.identity_signin(
        admission=ADMITTED, issuer=ISSUER, subject="s-2", display_name="   "
    )
    assert OwnerIdentity.objects.get(user=nameless).display_name == nameless.username
    long = services.identity_signin(
        admission=ADMITTED, issuer=ISSUER, subject="s-3", display_name="n" * 250
    )
    assert OwnerIdentity.objects.get(user=long).display_name == "n" * 200


def test_the_same_pair_signs_in_to_the_same_account_again() -> None:
    """VX-ID-1: a linked pair signs in to its account, read in one query; nothing new is made
    or audited."""
    first = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="s-4")
    with CaptureQueriesContext(connection) as queries:
        again = services.identity_signin(
            admission=ADMITTED, issuer=ISSUER, subject="s-4", display_name="Other"
        )
    assert again == first
    # Found by its pair at once: no account is begun and rolled back to find it.
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT"]
    assert User.objects.count() == 1
    assert OwnerIdentity.objects.get(user=first).display_name == first.username
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED).count() == 1


def test_a_sign_in_that_loses_the_race_for_a_new_pair_signs_in_to_the_winners_account(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-ID-1: two first sign-ins of one pair at once: the one that finds no account but then
    cannot make one (the other made it in between) signs in to the account the other made; no
    second account, no second link."""
    winner = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="s-race")
    real_lookup = identities.linked_user
    looked = []

    def before_the_other_committed(**pair: str) -> object:
        looked.append(pair)
        return None if len(looked) == 1 else real_lookup(**pair)

    monkeypatch.setattr(identities, "linked_user", before_the_other_committed)
    loser = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="s-race")
    assert loser == winner
    assert looked == [{"issuer": ISSUER, "subject": "s-race"}] * 2
    assert User.objects.count() == 1
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED).count() == 1


def test_a_password_owners_linked_pair_signs_in_to_that_owner() -> None:
    """VX-ID-1: a pair a password owner linked signs in to that owner, not to a new account."""
    owner = make_owner("erin", oidc=False)
    services.identity_proven(user=owner, issuer=ISSUER, subject="erin-at-idp")
    assert (
        services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="erin-at-idp") == owner
    )
    assert User.objects.count() == 1


def test_an_unproven_pair_on_record_is_not_an_account_to_sign_in_to() -> None:
    """VX-ID-1, VX-ID-4: an identity holding the pair without a proof (typed before proofs
    existed) is not taken over: the sign-in gets an account of its own."""
    owner = make_owner("fay", oidc=False)
    OwnerIdentity.objects.filter(user=owner).update(
        identity_issuer=ISSUER, identity_subject="fay-sub", identity_verified_at=None
    )
    user = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="fay-sub")
    assert user != owner
    assert OwnerIdentity.objects.get(user=owner).identity_verified_at is None


def test_the_same_subject_at_another_issuer_is_another_account() -> None:
    """VX-ID-4: a subject is an account only with its issuer: another issuer's same subject
    signs in to an account of its own."""
    first = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="shared")
    other = services.identity_signin(
        admission=ADMITTED, issuer="https://other.example.com", subject="shared"
    )
    assert other != first
    assert other.username == username_for(
        "https://other.example.com", "shared", "other.example.com"
    )


def test_an_account_with_the_same_name_is_never_taken_over() -> None:
    """VX-ID-4: when the made name is already an account's (in any case), the new owner gets the
    next free suffix; the existing account is untouched."""
    base = username_for(ISSUER, "s-5")
    squatter = User.objects.create_user(username=base.upper(), password="x" * 20)
    User.objects.create_user(username=f"{base}-2", password="x" * 20)
    user = services.identity_signin(admission=ADMITTED, issuer=ISSUER, subject="s-5")
    assert user.username == f"{base}-3"
    assert not OwnerIdentity.objects.filter(user=squatter).exists()


def test_a_host_is_made_safe_for_a_username() -> None:
    """VX-ID-1: an issuer host is kept within the characters a username allows (an IPv6
    address's colons become hyphens)."""
    user = services.identity_signin(
        admission=ADMITTED, issuer="https://[2001:db8::1]:8443/", subject="s-6"
    )
    assert user.username.startswith("2001-db8--1-")
    assert len(user.username) == len("2001-db8--1-") + 16


@pytest.mark.parametrize(
    ("issuer", "subject", "field"),
    [
        ("", "s", "identity_issuer"),
        ("https://x.example/" + "a" * 183, "s", "identity_issuer"),
        (None, "s", "identity_issuer"),
        (ISSUER, "", "identity_subject"),
        (ISSUER, "s" * 256, "identity_subject"),
        (ISSUER, 7, "identity_subject"),
    ],
)
def test_a_pair_out_of_bounds_is_refused_naming_its_field(issuer, subject, field) -> None:
    """VX-ID-1: an issuer of 0 or more than 200 characters, or a subject of 0 or more than 255,
    is refused by name; no account is made."""
    with pytest.raises(ValidationError) as refused:
        services.identity_signin(admission=ADMITTED, issuer=issuer, subject=subject)
    assert list(refused.value.message_dict) == [field]
    assert not User.objects.exists()


def test_a_pair_at_its_bounds_signs_in() -> None:
    """VX-ID-1: an issuer of exactly 200 characters and a subject of exactly 255 are taken."""
    issuer = "https://x.example/" + "a" * 182
    user = services.identity_signin(admission=ADMITTED, issuer=issuer, subject="s" * 255)
    assert OwnerIdentity.objects.get(user=user).identity_subject == "s" * 255


def test_a_refused_pair_is_refused_on_its_identity_saying_whom_to_ask() -> None:
    """VX-ID-5: a pair its issuer admits no account for is refused as the pairs out of bounds
    are, by field (the identity), in words that say why and what the person can do; no account
    is made. (personas.oidc words its own page for it, naming the issuer; this is the rule's
    answer to any other caller.)"""
    with pytest.raises(services.NotAdmitted) as refused:
        services.identity_signin(
            admission=services.Admission.REFUSED, issuer=ISSUER, subject="s-refused"
        )
    assert refused.value.message_dict == {
        "identity": [
            "this identity has no account here, and its issuer admits no new one: ask an "
            "administrator to add you"
        ]
    }
    assert not User.objects.exists()
