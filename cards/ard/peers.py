"""The ARD registries a federated search asks, as an operator records them (VX-DISC-5):
`virgo peers add`, the admin's Federation peers. What makes a peer acceptable (an http(s) ARD
API that is not this installation's own origin, a scheme Virgo sends, one token), how its
credential is kept (sealed at rest, bound to its URL), and how peers stored before URLs had one
spelling are brought to it (cards migration 0011). Asking and verifying peers is
cards.ard.federation's; this module loads neither the A2A client nor an HTTP client, so the
admin and the command import it at start for nothing.
"""

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

from cards import sealing
from cards.models import FederationPeer
from virgo.public_url import origin_of

SCHEMES = ("Token", "Bearer")


class PeerRefused(ValueError):
    """A peer Virgo will not add; the message names the field and why."""


def normalised_url(url: str) -> str:
    """The base URL of a peer's ARD API as stored: http(s), a host, no query, fragment or
    credentials, ending in `/` (its search is `<url>search`)."""
    stored = _spelled(url)
    if _is_own_origin(stored):
        raise PeerRefused(f"url: {stored} is this installation's own origin")
    return stored


def _spelled(url: str) -> str:
    """`url` in the one spelling a peer's URL is stored in, whoever's origin it names."""
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
    return f"{origin}{path}"


def _is_own_origin(stored: str) -> bool:
    # However either is spelled (case, a default port): one origin is one origin.
    return origin_of(stored) == origin_of(settings.VIRGO_PUBLIC_BASE_URL)


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


@dataclass
class Respelled:
    """What `normalise_stored_peers` did: the URLs rewritten (as stored, as now), and the URLs
    left as stored, disabled or not, each with why."""

    rewritten: list[tuple[str, str]]
    disabled: list[tuple[str, str]]
    left: list[tuple[str, str]]


def normalise_stored_peers(model: Any = FederationPeer, using: str = DEFAULT_DB_ALIAS) -> Respelled:
    """Store each peer added before URLs had one spelling (decision 296) in that spelling, its
    credential sealed again for it, so `virgo peers remove` and the own-origin rule find it.

    `model` is the migration's historical FederationPeer. Nothing is deleted and no credential
    is lost: a row that cannot be rewritten keeps its URL (decision 298).
    """
    done = Respelled([], [], [])
    spellings: dict[str, list[Any]] = {}
    for row in model.objects.using(using).order_by("added_at", "pk"):
        try:
            spellings.setdefault(_spelled(row.url), []).append(row)
        except PeerRefused as refused:
            done.left.append((row.url, str(refused)))
    for stored, rows in spellings.items():
        raw = [row for row in rows if row.url != stored]
        if _is_own_origin(stored):
            # Refused by `virgo peers add`, so a search must not ask it either.
            _disable(raw, "this installation's own origin", done)
            continue
        # The URL is unique: one row takes the spelling, the one an operator already gave in
        # it, else the first added; one repeating it is kept, disabled, for them to remove.
        repeated = f"another peer is stored as {stored}"
        if len(raw) < len(rows):
            _disable(raw, repeated, done)
            continue
        # One whose credential cannot be opened here stays as it was, and the next takes the
        # spelling: a row is disabled only when another really is stored in it.
        for taken, row in enumerate(raw):
            if _respell(row, stored, done):
                _disable(raw[taken + 1 :], repeated, done)
                break
    return done


def _disable(rows: list[Any], why: str, done: Respelled) -> None:
    for row in rows:
        row.enabled = False
        row.save(update_fields=["enabled"])
        done.disabled.append((row.url, why))


def _respell(row: Any, stored: str, done: Respelled) -> bool:
    """Whether the row now has the spelling; one whose credential does not open keeps its URL."""
    if row.credential_sealed:
        try:
            secret = sealing.unseal(row.url, row.credential_sealed, sealing.PEER_CREDENTIAL)
        except sealing.KeyCannotBeOpened as refused:
            # Sealed bound to the URL as stored: moving it would lose the credential for good.
            done.left.append((row.url, str(refused)))
            return False
        row.credential_sealed = sealing.seal(stored, secret, sealing.PEER_CREDENTIAL)
    done.rewritten.append((row.url, stored))
    row.url = stored
    row.save(update_fields=["url", "credential_sealed"])
    return True
