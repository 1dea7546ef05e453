"""Who may call a persona's remote MCP endpoint: the holder of a token bound to it (VX-REMOTE-1,
VX-REMOTE-2).

Each call looks its token up again by its SHA-256 (the only form stored), so a token revoked, a
persona revoked or an owner's account closed on any machine refuses the very next call on every
machine. A refusal is the RFC 6750 challenge the MCP authorization chapter asks for: 401 naming
the resource's metadata document (RFC 9728), with `error="invalid_token"` when a token was sent.
"""

import hashlib
from dataclasses import dataclass

from django.http import HttpRequest
from django.utils import timezone
from oauth2_provider.models import AbstractAccessToken, get_access_token_model

from personas.models import Persona
from serving.resources import SCOPE, metadata_url, resource_url


@dataclass
class Refused(Exception):
    status: int
    reason: str
    error: str | None = None

    def challenge(self, persona: Persona) -> str:
        parts = [f'resource_metadata="{metadata_url(persona.uuid)}"', f'scope="{SCOPE}"']
        if self.error:
            # The reason is Virgo's own text, never the client's, so it needs no escaping.
            parts += [f'error="{self.error}"', f'error_description="{self.reason}"']
        return "Bearer " + ", ".join(parts)


def bearer_token(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def check_access(request: HttpRequest, persona: Persona) -> AbstractAccessToken:
    """The token the request holds for `persona`'s endpoint, or Refused saying why not."""
    raw = bearer_token(request)
    if raw is None:
        raise Refused(401, "a bearer token for this persona's endpoint is required")
    tokens = get_access_token_model().objects.select_related("user", "application")
    try:
        token = tokens.get(token_checksum=hashlib.sha256(raw.encode()).hexdigest())
    except tokens.model.DoesNotExist:
        raise Refused(
            401, "the token was not issued here, or was revoked", "invalid_token"
        ) from None
    if token.expires <= timezone.now():
        raise Refused(401, "the token has expired: refresh it", "invalid_token")
    if list(token.resource or []) != [resource_url(persona.uuid)]:
        raise Refused(401, "the token was issued for another resource", "invalid_token")
    if token.user_id != persona.agent.owner_id or not token.user.is_active:
        raise Refused(
            401, "the persona's owner did not grant it, or their account is closed", "invalid_token"
        )
    if SCOPE not in token.scope.split():
        raise Refused(403, f"the token lacks the {SCOPE} scope", "insufficient_scope")
    return token


def connection_label(token: AbstractAccessToken) -> str:
    """How the audit trail names the client a call came from: the application the owner
    approved, by name and client id (what the admin shows and revokes)."""
    application = token.application
    if application is None:
        return f"OAuth token {token.pk}"
    return f"{application.name} (OAuth client {application.client_id})"
