"""VX-ID-5: an OpenID issuer makes an owner of a new (issuer, subject) only as its admission rule
says: verified e-mail or hosted domains, a superuser's approval, or everyone; by default (a
public issuer, say) no one. A pair already linked to an account signs in whatever the rule."""

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from personas import services
from personas.oidc import Issuer, admission_of
from personas.services import Admission
from tests.factories import make_owner

pytestmark = pytest.mark.django_db
ISSUER_URL = "https://accounts.example.com"


def issuer(admit: str, *domains: str) -> Issuer:
    return Issuer(
        name="public", label="Example ID",
        discovery_url=f"{ISSUER_URL}/.well-known/openid-configuration",
        client_id="virgo", client_secret="s", scopes="openid email", admit=admit,
        allowed_domains=domains,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "claims", "admission"),
    [
        (issuer("none"), {"email": "a@corp.example", "email_verified": True}, Admission.REFUSED),
        (issuer("everyone"), {}, Admission.ADMITTED),
        (issuer("approval"), {"email": "a@corp.example"}, Admission.AWAITS_APPROVAL),
        (issuer("domains", "corp.example"), {"email": "a@Corp.Example", "email_verified": True},
         Admission.ADMITTED),
        (issuer("domains", "corp.example"), {"hd": "corp.example"}, Admission.ADMITTED),
        # An address the issuer did not verify is anybody's to type.
        (issuer("domains", "corp.example"), {"email": "a@corp.example"}, Admission.REFUSED),
        (issuer("domains", "corp.example"), {"email": "a@corp.example", "email_verified": "true"},
         Admission.REFUSED),
        (issuer("domains", "corp.example"), {"email": "a@evil.example", "email_verified": True},
         Admission.REFUSED),
        (issuer("domains", "corp.example"),
         {"email": "a@corp.example.evil", "email_verified": True}, Admission.REFUSED),
        (issuer("domains", "corp.example"), {"email": "corp.example", "email_verified": True},
         Admission.REFUSED),
        # The domain is what follows the last "@": a quoted local part may hold one (RFC 5322).
        (issuer("domains", "corp.example"),
         {"email": '"a@evil.example"@corp.example', "email_verified": True}, Admission.ADMITTED),
        (issuer("domains", "corp.example"), {"hd": "other.example"}, Admission.REFUSED),
        (issuer("domains", "corp.example"), {"hd": ["corp.example"]}, Admission.REFUSED),
    ],
)  # fmt: skip
def test_the_rule_reads_only_what_the_issuer_vouches_for(
    rule: Issuer, claims: dict[str, Any], admission: Admission
) -> None:
    """VX-ID-5: domains by the hosted-domain claim or a verified address, exactly."""
    assert admission_of(rule, claims) is admission


def test_a_refused_pair_gets_no_account() -> None:
    """VX-ID-5: with no account and no admission, nothing is made."""
    before = get_user_model().objects.count()
    with pytest.raises(services.NotAdmitted, match="admits no new one"):
        services.identity_signin(issuer=ISSUER_URL, subject="s-1", admission=Admission.REFUSED)
    assert get_user_model().objects.count() == before


def test_a_pair_awaiting_approval_gets_an_inactive_account_a_superuser_activates() -> None:
    """VX-ID-5: the account exists (an administrator sees whom to approve) and cannot sign in
    until made active; signing in again finds the same account, still waiting."""
    waiting = services.identity_signin(
        issuer=ISSUER_URL, subject="s-2", admission=Admission.AWAITS_APPROVAL
    )
    assert (waiting.is_active, waiting.is_staff) == (False, True)
    again = services.identity_signin(
        issuer=ISSUER_URL, subject="s-2", admission=Admission.AWAITS_APPROVAL
    )
    assert again == waiting and not again.is_active


def test_a_linked_pair_signs_in_whatever_the_rule() -> None:
    """VX-ID-5: the rule admits accounts; it never locks out an owner who linked the pair."""
    owner = make_owner("linked", oidc=False)
    services.identity_proven(user=owner, issuer=ISSUER_URL, subject="owner-sub")
    signed_in = services.identity_signin(
        issuer=ISSUER_URL, subject="owner-sub", admission=Admission.REFUSED
    )
    assert signed_in == owner
