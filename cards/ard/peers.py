"""The ARD registries a federated search asks, as an operator records them (VX-DISC-5):
`virgo peers add`, the admin's Federation peers. What makes a peer acceptable (an http(s) ARD
API that is not this installation's own origin, a scheme Virgo sends, one token) and how its
credential is kept (sealed at rest, bound to its URL). Asking and verifying peers is
cards.ard.federation's; this module loads neither the A2A client nor an HTTP client, so the
admin and the command import it at start for nothing.
"""

from urllib.parse import urlsplit

from django.conf import settings

from cards import sealing
from cards.models import FederationPeer
from virgo.public_url import origin_of

SCHEMES = ("Token", "Bearer")


class PeerRefused(ValueError):
    """A peer Virgo will not add; the message names the field and why."""


def normalised_url(url: str) -> str:
    """The base URL of a peer's ARD API as stored: http(s), a host, no query, fragment or
    credentials, ending in `/` (its search is `<url>search`)."""
    try:
        origin = origin_of(url)
    except ValueError as not_one:
        raise PeerRefused(
            f"url: {url!r} is not an http(s) URL of an ARD registry: {not_one}"
        ) from None
    parts = urlsplit(url.strip())
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise PeerRefused(f"url: {url!r} carries a query, fragment or credentials; give them apart")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    stored = f"{origin}{path}"
    # However either is spelled (case, a default port): one origin is one origin.
    if origin == origin_of(settings.VIRGO_PUBLIC_BASE_URL):
        raise PeerRefused(f"url: {stored} is this installation's own origin")
    return stored


def add_peer(
    url: str, *, label: str = "", scheme: str = "Token", credential: str = ""
) -> FederationPeer:
    """Record a peer (or replace the one at the same URL), its credential sealed."""
    stored = normalised_url(url)
    if scheme not in SCHEMES:
        raise PeerRefused(f"scheme: {scheme!r} is not one of {', '.join(SCHEMES)}")
    credential = checked_credential(credential)
    sealed = sealed_credential(stored, credential)
    peer, _ = FederationPeer.objects.update_or_create(
        url=stored,
        defaults={
            "label": label.strip() or urlsplit(stored).netloc,
            "scheme": scheme,
            "credential_sealed": sealed,
            "enabled": True,
        },
    )
    return peer


def checked_credential(credential: str) -> str:
    """The token as it is sent: one word, the line break a file ends with dropped."""
    token = credential.strip()
    if any(character.isspace() for character in token):
        raise PeerRefused("credential: one token, without spaces or line breaks")
    return token


def sealed_credential(url: str, credential: str) -> str:
    """The credential as stored for the peer at `url` (empty for none)."""
    if not credential.strip():
        return ""
    return sealing.seal(url, credential.strip().encode(), sealing.PEER_CREDENTIAL)
