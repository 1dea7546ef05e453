"""The registered-address registry in the admin: moderators register, owners read."""

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from personas import services
from personas.models import RegisteredAddress
from tests.factories import make_owner
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401

pytestmark = pytest.mark.django_db
ADD = "/admin/personas/registeredaddress/add/"
LIST = "/admin/personas/registeredaddress/"


def signed_in(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def moderator() -> Any:
    user = make_owner("moderator")
    user.is_superuser = True
    user.save()
    return user


def test_a_moderator_registers_a_canonical_address(moderator: Any) -> None:
    """V1-FAC-2: the registry holds canonical addresses only."""
    response = signed_in(moderator).post(ADD, {"path": "work/core/lead"})
    assert response.status_code == 302
    assert RegisteredAddress.objects.get(path="work/core/lead").registered_by == moderator


@pytest.mark.parametrize("path", ["work", "root/core/lead", "Work/Lead", "a/b/c/d", "work/root"])
def test_a_malformed_address_is_refused_on_its_field(moderator: Any, path: str) -> None:
    """V1-FAC-2: a malformed address is rejected with a clear error, nothing registered."""
    response = signed_in(moderator).post(ADD, {"path": path})
    assert response.status_code == 200
    assert "path" in response.context["adminform"].form.errors
    assert not RegisteredAddress.objects.exists()


def test_owners_read_the_registry_but_cannot_register() -> None:
    owner = make_owner()
    RegisteredAddress.objects.create(path="work/coordinator")
    client = signed_in(owner)
    assert b"work/coordinator" in client.get(LIST).content
    assert client.get(ADD).status_code == 403
    with pytest.raises(PermissionDenied):
        services.address_register(actor=owner, path="work/other")


def test_registering_twice_is_a_clear_error(moderator: Any) -> None:
    services.address_register(actor=moderator, path="root/secretary")
    with pytest.raises(ValidationError) as raised:
        services.address_register(actor=moderator, path="root/secretary")
    assert "already registered" in str(raised.value.message_dict["path"])
