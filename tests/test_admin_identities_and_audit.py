"""Owner identities (each owner edits their own) and the read-only audit trail in the admin."""

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client

from personas import services
from personas.models import AuditEvent, OrganizationDomain, OwnerIdentity, Persona
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import PASSWORD, form_data, fresh_rate_limits  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db

IDENTITIES = "/admin/personas/owneridentity/"
AUDIT = "/admin/personas/auditevent/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def saving(page: Any) -> dict[str, Any]:
    return {**form_data(page, "owneridentity_form"), "_save": "Save"}


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(make_agent(owner), verb_subset=REVIEWER_VERBS)


# Owner identities ------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_the_login_page(owner: Any) -> None:
    """S9-AUTH-1"""
    for url in (IDENTITIES, f"{IDENTITIES}{owner.identity.pk}/change/", AUDIT):
        assert Client().get(url)["Location"].startswith("/admin/login/")


def prove(owner: Any, domain: str) -> OrganizationDomain:
    claim = services.organization_claim(owner=owner, domain=domain)
    return services.organization_approve(claim=claim, actor=services.INSTALLATION)


def test_the_owner_names_another_proven_domain_and_their_personas_follow(
    owner: Any, persona: Persona
) -> None:
    """S9-SCN-5, VX-ID-2: the provider is the owner's proven domain; naming another one
    re-settles every persona, whose new card names it."""
    engines = prove(owner, "engines.example.org")
    client = signed_in(owner)
    url = f"{IDENTITIES}{owner.identity.pk}/change/"
    data = saving(client.get(url))
    data["organization_domain"] = str(engines.pk)
    with run_on_commit():
        assert client.post(url, data).status_code == 302
    owner.identity.refresh_from_db()
    assert owner.identity.organization_domain == engines
    persona.refresh_from_db()
    assert persona.generation == 2
    current = persona.generations.get(number=2)
    assert current.composition["provider"] == {
        "organization": "engines.example.org",
        "url": "https://engines.example.org/",
    }


def test_an_owner_cannot_name_a_domain_not_proven_for_them(owner: Any, persona: Persona) -> None:
    """VX-ID-4, VX-ID-2: the form offers only the owner's proven (or shared) domains; posting
    another owner's proven domain, or one's own unproven claim, is a field error and nothing
    changes."""
    mallory = make_owner("mallory", organization="")
    claimed = services.organization_claim(owner=mallory, domain="ada.example.org.evil.example")
    client = signed_in(mallory)
    url = f"{IDENTITIES}{mallory.identity.pk}/change/"
    page = client.get(url)
    offered = page.context["adminform"].form.fields["organization_domain"].queryset
    assert list(offered) == []
    for stolen in (owner.identity.organization_domain, claimed):
        data = saving(page)
        data["organization_domain"] = str(stolen.pk)
        response = client.post(url, data)
        assert response.status_code == 200
        assert "organization_domain" in response.context["adminform"].form.errors
    mallory.identity.refresh_from_db()
    assert mallory.identity.organization_domain is None
    assert services.composition_of(make_persona(make_agent(mallory)))["provider"] == {
        "organization": settings.VIRGO_PROVIDER_ORGANIZATION,
        "url": settings.VIRGO_PROVIDER_URL,
    }


def test_the_oidc_issuer_and_subject_are_never_typed(owner: Any) -> None:
    """VX-ID-1: the admin shows the issuer and subject read-only; a posted value is ignored."""
    client = signed_in(owner)
    url = f"{IDENTITIES}{owner.identity.pk}/change/"
    page = client.get(url)
    assert {"identity_issuer", "identity_subject"}.isdisjoint(page.context["adminform"].form.fields)
    data = saving(page)
    data.update(identity_issuer="https://evil.example/", identity_subject="sub-victim")
    assert client.post(url, data).status_code == 302
    owner.identity.refresh_from_db()
    assert owner.identity.identity_issuer == "https://id.example.org/"
    assert owner.identity.identity_subject == "sub-ada"
    with pytest.raises(ValidationError) as refused:
        services.owner_identity_update(user=owner, identity_subject="sub-victim")
    assert "identity_subject" in refused.value.message_dict


def test_identity_errors_land_on_their_field(owner: Any) -> None:
    client = signed_in(owner)
    url = f"{IDENTITIES}{owner.identity.pk}/change/"
    data = saving(client.get(url))
    data["display_name"] = ""
    response = client.post(url, data)
    assert response.status_code == 200
    assert "display_name" in response.context["adminform"].form.errors
    owner.identity.refresh_from_db()
    assert owner.identity.display_name == "Ada"


def test_another_owner_neither_sees_nor_changes_the_identity(owner: Any) -> None:
    """S9-AUTH-2"""
    mallory = signed_in(make_owner("mallory"))
    assert "ada.example.org" not in mallory.get(IDENTITIES).content.decode()
    url = f"{IDENTITIES}{owner.identity.pk}/change/"
    assert mallory.get(url)["Location"] == "/admin/"
    data = saving(signed_in(owner).get(url))
    data["display_name"] = "Stolen"
    mallory.post(url, data)
    owner.identity.refresh_from_db()
    assert owner.identity.display_name == "Ada"


def test_an_owner_without_an_identity_adds_their_own_once() -> None:
    user = get_user_model().objects.create_user("newcomer", password=PASSWORD, is_staff=True)
    client = signed_in(user)
    page = client.get(f"{IDENTITIES}add/")
    assert page.status_code == 200
    data = saving(page)
    data.update(display_name="Newcomer")
    assert client.post(f"{IDENTITIES}add/", data).status_code == 302
    identity = OwnerIdentity.objects.get(user=user)
    assert identity.display_name == "Newcomer"
    assert identity.organization_domain is None
    assert client.get(f"{IDENTITIES}add/").status_code == 403


def test_identities_are_never_deleted(owner: Any) -> None:
    response = signed_in(owner).post(f"{IDENTITIES}{owner.identity.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert OwnerIdentity.objects.filter(user=owner).exists()


# The audit trail -------------------------------------------------------------------------------


def test_each_owner_sees_the_audit_of_their_own_personas_only(owner: Any, persona: Persona) -> None:
    """S9-DISC-1: toggles are audited (who, when, from, to) and visible to their owner."""
    services.persona_set_discoverable(persona=persona, actor=owner, discoverable=True, via="test")
    html = signed_in(owner).get(AUDIT).content.decode()
    assert "not listed → listed (via test)" in html
    assert "not listed → listed" not in signed_in(make_owner("mallory")).get(AUDIT).content.decode()


def test_moderators_see_every_audit_event(owner: Any, persona: Persona) -> None:
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    services.persona_set_discoverable(persona=persona, actor=owner, discoverable=True, via="test")
    assert "not listed → listed" in signed_in(moderator).get(AUDIT).content.decode()


def test_the_audit_trail_is_read_only(owner: Any, persona: Persona) -> None:
    event = services.persona_set_discoverable(
        persona=persona, actor=owner, discoverable=True, via="test"
    ).audit_events.get(kind=AuditEvent.Kind.DISCOVERABILITY)
    client = signed_in(owner)
    detail = client.get(f"{AUDIT}{event.pk}/change/")
    assert detail.status_code == 200
    assert 'id="auditevent_form"' in detail.content.decode()
    assert set(form_data(detail, None)) == {"csrfmiddlewaretoken"}
    assert client.get(f"{AUDIT}add/").status_code == 403
    assert client.post(f"{AUDIT}{event.pk}/change/", {"kind": "x"}).status_code == 403
    assert client.post(f"{AUDIT}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).data["to"] is True
