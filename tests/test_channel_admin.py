"""The channel's admin: owners set their own authority surface and read their own deliveries."""

from collections.abc import Iterator

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from channel import services
from channel.hub import Hub
from channel.models import AuthoritySurface, Delivery
from tests.channel_support import OPS, running_hub, surface_persona
from tests.factories import make_owner, register_surfaces
from tests.runtime_support import call

pytestmark = pytest.mark.django_db

SURFACES = reverse("admin:channel_authoritysurface_changelist")
DELIVERIES = reverse("admin:channel_delivery_changelist")


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_owner_sets_their_own_authority_surface_in_the_admin() -> None:
    owner = make_owner()
    register_surfaces(owner, ["teams:user/ada"])
    response = signed_in(owner).post(
        reverse("admin:channel_authoritysurface_add"),
        {"binding": "teams:user/ada", "principal": "aad:ada@example.org"},
    )
    assert response.status_code == 302, response.content
    surface = AuthoritySurface.objects.get()
    assert (surface.user, surface.binding, surface.principal) == (
        owner,
        "teams:user/ada",
        "aad:ada@example.org",
    )


def test_owner_other_owner_and_anonymous_on_authority_surfaces() -> None:
    """V1-CONF-1: who may approve an owner's requests is the owner's own setting."""
    owner, other = make_owner(), make_owner()
    register_surfaces(owner, ["teams:user/ada"])
    surface = services.authority_surface_set(
        user=owner, actor=owner, binding="teams:user/ada", principal="aad:ada@example.org"
    )
    change = reverse("admin:channel_authoritysurface_change", args=[surface.pk])
    assert "aad:ada@example.org" in signed_in(owner).get(SURFACES).content.decode()
    assert "aad:ada@example.org" not in signed_in(other).get(SURFACES).content.decode()
    taken = signed_in(other).post(change, {"binding": "teams:user/eve", "principal": "aad:eve"})
    assert taken.status_code in (302, 403, 404)
    surface.refresh_from_db()
    assert surface.principal == "aad:ada@example.org"
    anonymous = Client().get(SURFACES)
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    with pytest.raises(PermissionDenied):
        services.authority_surface_set(user=owner, actor=other, binding="x", principal="y")
    with pytest.raises(ValidationError):
        services.authority_surface_set(user=owner, actor=owner, binding=" ", principal="y")


def test_owners_read_their_own_personas_deliveries_and_nobody_edits_them(hub: Hub) -> None:
    persona = surface_persona()
    result = call(persona, "send_human_message", {"binding": OPS, "text": "hi"})
    delivery = Delivery.objects.get(correlation_id=result["correlation_id"])
    owner = persona.agent.owner
    listing = signed_in(owner).get(DELIVERIES)
    assert listing.status_code == 200 and delivery.correlation_id in listing.content.decode()
    other = signed_in(make_owner()).get(DELIVERIES)
    assert delivery.correlation_id not in other.content.decode()
    change = reverse("admin:channel_delivery_change", args=[delivery.pk])
    assert signed_in(owner).post(change, {"status": "unknown"}).status_code == 403
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.APPLIED
    assert signed_in(owner).get(reverse("admin:channel_delivery_add")).status_code == 403
    assert Client().get(DELIVERIES).status_code == 302
