"""Each persona's remote MCP endpoint as an OAuth protected resource (VX-REMOTE-1).

The resource identifier is the endpoint's own URL under the installation's public base URL, so a
token bound to it (RFC 8707) names one persona, and its metadata document sits at the RFC 9728
path-inserted address, which the 401 names.
"""

import uuid

from django.conf import settings

from personas.models import mcp_url

ENDPOINT_PREFIX = "/mcp/"
METADATA_PREFIX = "/.well-known/oauth-protected-resource"
SCOPE = "mcp"


def resource_url(persona_uuid: uuid.UUID) -> str:
    return mcp_url(persona_uuid)


def metadata_url(persona_uuid: uuid.UUID) -> str:
    return f"{settings.VIRGO_PUBLIC_BASE_URL}{METADATA_PREFIX}{ENDPOINT_PREFIX}{persona_uuid}"


def persona_uuid_of(resource: str) -> uuid.UUID | None:
    """The persona a resource indicator names, or None: only this installation's endpoint URLs,
    written exactly as resource_url writes them, name one."""
    prefix = f"{settings.VIRGO_PUBLIC_BASE_URL}{ENDPOINT_PREFIX}"
    if not resource.startswith(prefix):
        return None
    try:
        named = uuid.UUID(resource.removeprefix(prefix))
    except ValueError:
        return None
    return named if resource == resource_url(named) else None
