"""serving.connections.open_connection, called as the admin's add form calls it and as an
attacker would (VX-REMOTE-1, VX-REMOTE-3): the grant it makes is the consent page's, bound to
one persona's endpoint, with secrets of full strength stored only as digests."""

import base64
import uuid

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from oauth2_provider.models import AccessToken, RefreshToken

from personas.services import persona_revoke
from serving.connections import open_connection
from serving.oauth import NOT_THE_OWNER, NOT_YOUR_CLIENT
from serving.resources import SCOPE, resource_url
from tests.factories import make_owner, run_on_commit
from tests.remote_support import public_client, refresh
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


def test_the_connection_is_a_grant_of_that_persona_alone() -> None:
    """VX-REMOTE-1: the refresh token is 32 random bytes, kept only as its digest, bound to the
    persona's endpoint, of a token family of its own; its access token, expired from the start,
    is the owner's, of their client, for that one resource and scope, so the host must refresh."""
    persona = standing_persona()
    owner = persona.agent.owner
    client = public_client(owner)
    raw = open_connection(RefreshToken(user=owner, application=client), persona=persona)
    assert len(base64.urlsafe_b64decode(raw + "=")) == 32
    [connection] = RefreshToken.objects.all()
    assert connection.token == "" and connection.token_checksum
    assert connection.resource == [resource_url(persona.uuid)]
    assert isinstance(connection.token_family, uuid.UUID)
    spent = connection.access_token
    assert (spent.user, spent.application) == (owner, client)
    assert spent.resource == [resource_url(persona.uuid)] and spent.scope == SCOPE
    assert spent.expires <= timezone.now() and spent.token_checksum
    assert spent.token_checksum != connection.token_checksum
    again = open_connection(RefreshToken(user=owner, application=client), persona=persona)
    assert again != raw
    assert RefreshToken.objects.exclude(pk=connection.pk).get().token_family != (
        connection.token_family
    )
    assert refresh(client, raw).status_code == 200


@pytest.mark.parametrize("whose", ["persona", "client"])
def test_another_owners_persona_or_client_is_refused_in_the_consent_pages_words(
    whose: str,
) -> None:
    """VX-REMOTE-1, attacker: an owner opening a connection to another owner's persona, or for
    another owner's client, is refused as the consent page refuses it, and nothing is made."""
    persona = standing_persona()
    owner = persona.agent.owner
    stranger = make_owner()
    target = standing_persona(stranger) if whose == "persona" else persona
    client = public_client(stranger if whose == "client" else owner)
    with pytest.raises(ValidationError) as refused:
        open_connection(RefreshToken(user=owner, application=client), persona=target)
    assert refused.value.messages == [NOT_THE_OWNER if whose == "persona" else NOT_YOUR_CLIENT]
    assert not RefreshToken.objects.exists() and not AccessToken.objects.exists()


def test_a_revoked_persona_gets_no_connection() -> None:
    """VX-REMOTE-2: a revoked persona's tools are served to nobody: no connection is opened."""
    persona = standing_persona()
    owner = persona.agent.owner
    with run_on_commit():
        persona_revoke(
            persona=persona, actor=owner, reason_code="retired", reason="gone", via="test"
        )
    with pytest.raises(ValidationError, match="the persona is revoked"):
        open_connection(RefreshToken(user=owner, application=public_client(owner)), persona=persona)
    assert not RefreshToken.objects.exists()
