"""The organization domains page of the admin (VX-ID-2): owners claim, read the instructions,
verify and share; superusers see every claim and approve; nobody else sees or acts on another
owner's claim (VX-ID-4)."""

from typing import Any

import pytest
from django.test import Client

from personas import proofs, services
from personas.models import AuditEvent, OrganizationDomain, Verification
from tests.factories import make_owner, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse)
from tests.proof_servers import ProofWorld

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/personas/organizationdomain/"
ADD = f"{CHANGELIST}add/"
DOMAIN = "acme.example"


def change_url(claim: OrganizationDomain) -> str:
    return f"{CHANGELIST}{claim.pk}/change/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def said(response: Any) -> list[str]:
    """The messages the page a response led to showed (so they are not shown again)."""
    return [str(message) for message in response.context["messages"]]


def act(client: Client, action: str, *claims: OrganizationDomain) -> Any:
    chosen = [claim.pk for claim in claims]
    return client.post(CHANGELIST, {"action": action, "_selected_action": chosen}, follow=True)


@pytest.fixture
def ada() -> Any:
    return make_owner("ada", organization="")


@pytest.fixture
def superuser() -> Any:
    root = make_owner("root", organization="")
    root.is_superuser = True
    root.save()
    return root


def test_an_owner_claims_a_domain_and_reads_how_to_prove_it(ada: Any) -> None:
    """VX-ID-2: the add form takes a domain; the claim's page shows its token, the TXT record's
    name and value, the well-known URL and its content."""
    client = signed_in(ada)
    response = client.post(ADD, {"domain": "ACME.example", "_save": "Save"})
    claim = OrganizationDomain.objects.get(owner=ada)
    assert response["Location"] == change_url(claim)
    assert claim.domain == DOMAIN
    assert not claim.is_verified
    page = client.get(change_url(claim)).content.decode()
    assert f"_virgo-challenge.{DOMAIN}" in page
    assert f"virgo-domain-verification={claim.token}" in page
    assert proofs.well_known_url(DOMAIN) in page
    assert "not verified: waiting for its proof" in page
    assert "Verify now" in page
    assert "Approve" not in page


@pytest.mark.parametrize(
    "text", ["https://acme.example/", "acme.example/path", "10.0.0.1", "acme..example"]
)
def test_what_is_not_a_domain_is_refused_on_the_field(ada: Any, text: str) -> None:
    """VX-ID-2: the refusal lands on the domain field; nothing is claimed."""
    response = signed_in(ada).post(ADD, {"domain": text, "_save": "Save"})
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["domain"]
    assert not OrganizationDomain.objects.exists()


def test_a_domain_another_owner_proved_is_refused_on_the_field(ada: Any) -> None:
    """VX-ID-4: the second owner is told whose it is to share, not given a claim."""
    services.organization_approve(
        claim=services.organization_claim(owner=ada, domain=DOMAIN), actor=services.INSTALLATION
    )
    response = signed_in(make_owner("mallory", organization="")).post(
        ADD, {"domain": DOMAIN, "_save": "Save"}
    )
    assert response.context["adminform"].form.errors["domain"] == [
        f"{DOMAIN} is proven by another owner; ask them to share it with you"
    ]


@pytest.mark.live
def test_verify_now_checks_the_proof_and_says_what_it_found(
    proof_world: ProofWorld, ada: Any
) -> None:
    """VX-ID-2: "Verify now" runs the check; a failure is a message, never a 500."""
    claim = services.organization_claim(owner=ada, domain=DOMAIN)
    client = signed_in(ada)
    response = act(client, "verify_now", claim)
    assert response.status_code == 200
    [message] = said(response)
    assert message.startswith(f"{DOMAIN}: not verified. DNS TXT record: no TXT record")
    proof_world.publish_txt(DOMAIN, f"{proofs.TXT_VALUE_PREFIX}{claim.token}")
    with run_on_commit():
        response = act(client, "verify_now", claim)
    assert said(response) == [f"{DOMAIN}: verified (DNS TXT record)."]
    claim.refresh_from_db()
    assert claim.verification == Verification.DNS_TXT
    assert "verified: DNS TXT record" in client.get(CHANGELIST).content.decode()


def test_an_owner_sees_only_their_claims_and_those_shared_with_them(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: another owner's claim is neither listed nor opened nor acted on; one
    shared with you is shown read-only, without its token."""
    claim = services.organization_approve(
        claim=services.organization_claim(owner=ada, domain=DOMAIN), actor=services.INSTALLATION
    )
    mallory = signed_in(make_owner("mallory", organization=""))
    assert DOMAIN not in mallory.get(CHANGELIST).content.decode()
    assert mallory.get(change_url(claim)).status_code == 302  # "doesn't exist", to the index
    act(mallory, "verify_now", claim)
    act(mallory, "delete_selected", claim)
    mallory.post(change_url(claim), {"share_with": "mallory", "_save": "Save"})
    claim.refresh_from_db()
    assert list(claim.shared_with.all()) == []

    grace = make_owner("grace", organization="")
    services.organization_share(claim=claim, with_user=grace, actor=ada)
    client = signed_in(grace)
    assert DOMAIN in client.get(CHANGELIST).content.decode()
    page = client.get(change_url(claim)).content.decode()
    assert claim.token not in page
    assert 'name="share_with"' not in page
    assert client.post(change_url(claim), {"share_with": "grace"}).status_code == 403
    response = act(client, "verify_now", claim)
    assert said(response) == [
        f"{DOMAIN}: only the domain's owner or a superuser may check its proof"
    ]


def test_the_owner_shares_a_verified_domain_by_username(ada: Any) -> None:
    """VX-ID-2: sharing is by username, audited by the service; an unknown name is refused on
    the field."""
    claim = services.organization_approve(
        claim=services.organization_claim(owner=ada, domain=DOMAIN), actor=services.INSTALLATION
    )
    grace = make_owner("grace", organization="")
    client = signed_in(ada)
    response = client.post(change_url(claim), {"share_with": "nobody", "_save": "Save"})
    assert response.context["adminform"].form.errors["share_with"] == ["no owner is named 'nobody'"]
    response = client.post(change_url(claim), {"share_with": "ada", "_save": "Save"})
    assert response.context["adminform"].form.errors["share_with"] == [f"ada owns {DOMAIN} already"]
    with run_on_commit():
        response = client.post(change_url(claim), {"share_with": "grace", "_save": "Save"})
    assert response.status_code == 302
    assert list(claim.shared_with.all()) == [grace]
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ORGANIZATION_SHARED).count() == 1


def test_a_superuser_sees_every_claim_and_approves_it(ada: Any, superuser: Any) -> None:
    """VX-ID-2: the approve action is a superuser's, verifies as `operator` and is audited."""
    claim = services.organization_claim(owner=ada, domain=DOMAIN)
    client = signed_in(superuser)
    assert DOMAIN in client.get(CHANGELIST).content.decode()
    assert "Approve" in client.get(change_url(claim)).content.decode()
    with run_on_commit():
        response = act(client, "approve", claim)
    assert said(response) == [f"{DOMAIN}: approved for ada."]
    claim.refresh_from_db()
    assert claim.verification == Verification.OPERATOR
    approval = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_APPROVED)
    assert approval.actor == superuser
    audit = client.get("/admin/personas/auditevent/").content.decode()
    # The owner by name, never by id (VX-AUDIT-2).
    assert f"{DOMAIN} approved by the superuser for ada" in audit
    assert f"owner #{ada.pk}" not in audit


def test_an_owner_cannot_approve_through_the_admin(ada: Any) -> None:
    """VX-ID-2, VX-ID-4: the action is not offered to an owner, and posting it approves
    nothing."""
    claim = services.organization_claim(owner=ada, domain=DOMAIN)
    client = signed_in(ada)
    assert 'value="approve"' not in client.get(CHANGELIST).content.decode()
    act(client, "approve", claim)
    claim.refresh_from_db()
    assert not claim.is_verified
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.ORGANIZATION_APPROVED).exists()


def test_the_owner_removes_a_claim(ada: Any) -> None:
    """VX-ID-2: deleting goes through the service (cards settled again)."""
    claim = services.organization_claim(owner=ada, domain=DOMAIN)
    client = signed_in(ada)
    assert client.post(f"{CHANGELIST}{claim.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not OrganizationDomain.objects.exists()
