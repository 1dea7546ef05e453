"""Connections an owner opens by hand, for an agent host that cannot show a consent page
(VX-REMOTE-1, VX-REMOTE-3): a machine with no browser, a CI runner.

The owner picks one of their clients and one of their personas in the admin; Virgo makes the
refresh token of a new connection, bound to that persona's endpoint exactly as a consented one
is, and shows it once. The host spends it for its first access token (`python -m
serving.connect ... --refresh-token-file`) and keeps refreshing; the owner revokes it as any
other connection.
"""

import secrets
import uuid

from django.core.exceptions import ValidationError
from django.utils import timezone
from oauth2_provider.models import AccessToken, RefreshToken, set_token_value

from personas.models import Persona
from serving.oauth import grantable_persona
from serving.resources import SCOPE, resource_url


def open_connection(connection: RefreshToken, *, persona: Persona) -> str:
    """Save `connection` (its user the owner, its application their client) as a new grant of
    `persona`; the refresh token to hand to the host, made here and stored only as its digest.
    ValidationError saying why, under the consent page's rules, when the owner may not grant
    this client this persona."""
    verdict = grantable_persona(
        [resource_url(persona.uuid)], connection.user, connection.application
    )
    if isinstance(verdict, str):
        raise ValidationError(verdict)
    resource = [resource_url(persona.uuid)]
    # The toolkit refreshes only a token paired with an access token, whose scope the refresh
    # inherits: this one is expired from the start, so the host must spend the refresh token.
    spent = AccessToken(
        user=connection.user,
        application=connection.application,
        resource=resource,
        scope=SCOPE,
        expires=timezone.now(),
    )
    set_token_value(spent, secrets.token_urlsafe(32))
    spent.save()
    raw = secrets.token_urlsafe(32)
    connection.resource = resource
    connection.access_token = spent
    connection.token_family = uuid.uuid4()
    set_token_value(connection, raw)
    connection.save()
    return raw
