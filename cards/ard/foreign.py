"""A peer registry's entry, checked before this registry shows it (VX-DISC-5).

A foreign entry is shown only when the card it names verifies as a peer verifies one of
Virgo's own (docs/find_virgo.py does the same walk): the card's signatures by a key of the JWKS
at the card's own origin (never a `jku` the card names); the entry's publisher bound to what
that card says (its origin's host, or the organization domain its identity chain names); the
entry's pinned-grant digest equal to the card's; and the revocation status list the card names,
on the card's origin, signed by a key of the same JWKS, inside its validity period, with the
card's bit clear. Whatever fails, the entry is left out and `Unverified` says why.

Every fetch goes through virgo.outbound (checked addresses, no redirects, bounded bodies) and
ends by the search's deadline; a peer's JWKS and status lists are fetched once per search.
"""

import base64
import binascii
import json
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from google.protobuf.json_format import ParseError
from jwt.exceptions import PyJWKError

from cards.ard.entries import ENTRY_TYPE, PINNED_GRANT, URN_PREFIX
from cards.rendering import IDENTITY_EXTENSION, PINNED_GRANT_EXTENSION
from cards.signing import ALGORITHMS, JWKS_PATH, BadSignature, verify_document
from cards.status_list import STATUS_EXTENSION
from virgo import outbound
from virgo.public_url import origin_of

CARD_BYTES = 256 * 1024
JWKS_BYTES = 64 * 1024
STATUS_LIST_BYTES = 1024 * 1024
# A status list's bits, decompressed: W3C's lists are 16 KB and up; a peer with millions of
# cards still fits, and a compressed bomb stops here.
STATUS_BITS_BYTES = 16 * 1024 * 1024


class Unverified(Exception):
    """Why a foreign entry is not shown (never a credential: only what the peer served)."""


@dataclass
class Fetcher:
    """JSON documents fetched for one search: each within what is left of its deadline."""

    deadline: float
    # The peer's own origin, which its operator chose: reachable wherever it is (loopback, a
    # private network). Any other origin an entry names is checked as every outbound URL is.
    peer_origin: str = ""
    documents: dict[str, Any] = field(default_factory=dict)

    def json(self, url: str, what: str, limit: int) -> Any:
        if url not in self.documents:
            self.documents[url] = json_object(
                url,
                what=what,
                deadline=self.deadline,
                limit=limit,
                operator_chosen=origin_of(url) == self.peer_origin,
            )
        return self.documents[url]


def json_object(
    url: str,
    *,
    what: str,
    deadline: float,
    limit: int,
    operator_chosen: bool,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
) -> dict[str, Any]:
    """The JSON object `url` answers 200 with, within what is left until `deadline`; anything
    else (refused, too large, no answer, another status, not a JSON object) is Unverified."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Unverified(f"{what}: no time left in the search's budget")
    try:
        fetched = outbound.fetch(
            url,
            what=what,
            timeout=remaining,
            limit=limit,
            method=method,
            headers=headers,
            content=content,
            operator_chosen=operator_chosen,
        )
    except (outbound.DestinationRefused, outbound.TooLarge) as refused:
        raise Unverified(str(refused)) from None
    except httpx.HTTPError as failed:
        raise Unverified(f"{what}: {url} did not answer ({type(failed).__name__})") from None
    if fetched.status != 200:
        raise Unverified(f"{what}: {url} answered {fetched.status}")
    try:
        document = json.loads(fetched.body)
    except ValueError:
        raise Unverified(f"{what}: {url} is not JSON") from None
    if not isinstance(document, dict):
        raise Unverified(f"{what}: {url} is not a JSON object")
    return document


def verified(entry: Any, fetcher: Fetcher) -> dict[str, Any]:
    """`entry` when its card, publisher, pinned grant and status all verify; else Unverified."""
    if not isinstance(entry, dict):
        raise Unverified("the entry is not a JSON object")
    urn, kind, url = entry.get("identifier"), entry.get("type"), entry.get("url")
    if not isinstance(urn, str) or not urn.startswith(URN_PREFIX):
        raise Unverified("the entry has no urn:air: identifier")
    if kind != ENTRY_TYPE:
        raise Unverified(f"{urn}: only A2A agent cards can be verified, not {kind!r}")
    origin = _origin_or_none(url)
    if origin is None:
        raise Unverified(f"{urn}: the entry names no http(s) card URL")
    card = fetcher.json(url, "card", CARD_BYTES)
    keys = _jwks(origin, fetcher)
    _check_signatures(card, keys, urn)
    extensions = _extensions(card)
    _check_publisher(urn, url, extensions.get(IDENTITY_EXTENSION, {}))
    _check_pinned_grant(entry, extensions.get(PINNED_GRANT_EXTENSION), urn)
    _check_status(extensions.get(STATUS_EXTENSION), origin, keys, fetcher, urn)
    return entry


def _origin_or_none(url: Any) -> str | None:
    if not isinstance(url, str):
        return None
    try:
        return origin_of(url)
    except ValueError:
        return None


def _jwks(origin: str, fetcher: Fetcher) -> dict[str, dict[str, Any]]:
    document = fetcher.json(origin + JWKS_PATH, "JWKS", JWKS_BYTES)
    published = document.get("keys")
    if not isinstance(published, list):
        raise Unverified(f"{origin}{JWKS_PATH} has no keys")
    return {
        jwk["kid"]: jwk
        for jwk in published
        if isinstance(jwk, dict) and isinstance(jwk.get("kid"), str)
    }


def _key(keys: dict[str, dict[str, Any]], kid: Any) -> jwt.PyJWK:
    """The published key `kid` names, as PyJWT reads it; only the algorithms cards are signed
    with, so a key of another kind never verifies."""
    jwk = keys.get(kid) if isinstance(kid, str) else None
    if jwk is None:
        raise PyJWKError(f"no key {kid!r} in the card origin's JWKS")
    if jwk.get("alg") not in ALGORITHMS:
        raise PyJWKError(f"key {kid!r} is not for {' or '.join(ALGORITHMS)}")
    return jwt.PyJWK(jwk)


def _check_signatures(card: dict[str, Any], keys: dict[str, dict[str, Any]], urn: str) -> None:
    def provider(kid: str | None, jku: str | None) -> jwt.PyJWK:
        # The card's jku is not followed: only keys of the origin that serves the card count.
        return _key(keys, kid)

    try:
        create_signature_verifier(provider, ALGORITHMS)(parse_agent_card(card))
    except (ParseError, SignatureVerificationError, ValueError, TypeError) as failed:
        raise Unverified(f"{urn}: its card's signatures do not verify ({failed})") from None


def _extensions(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    capabilities = card.get("capabilities")
    listed = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    found: dict[str, dict[str, Any]] = {}
    for extension in listed if isinstance(listed, list) else []:
        if isinstance(extension, dict) and isinstance(extension.get("params"), dict):
            found.setdefault(str(extension.get("uri")), extension["params"])
    return found


def _check_publisher(urn: str, url: str, identity: dict[str, Any]) -> None:
    """The URN's publisher is the card origin's host, or the organization domain the signed
    card's identity chain names as its provider: a peer cannot publish under another's name."""
    publisher = urn[len(URN_PREFIX) :].split(":", 1)[0].lower()
    allowed = {(urlsplit(url).hostname or "").lower()}
    organization = identity.get("organization")
    if (
        identity.get("provider") == "organization"
        and isinstance(organization, dict)
        and organization.get("verification", "unverified") != "unverified"
    ):
        allowed.add(str(organization.get("domain", "")).lower())
    if not publisher or publisher not in allowed:
        raise Unverified(
            f"{urn}: its publisher {publisher!r} is neither the card's host nor the "
            "organization its signed card names"
        )


def _check_pinned_grant(entry: dict[str, Any], pinned: dict[str, Any] | None, urn: str) -> None:
    digest = pinned.get("grantDigest") if pinned else None
    if not isinstance(digest, str) or not digest:
        raise Unverified(f"{urn}: its card pins no grant")
    manifest = entry.get("trustManifest")
    attestations = manifest.get("attestations") if isinstance(manifest, dict) else None
    for attestation in attestations if isinstance(attestations, list) else []:
        if (
            isinstance(attestation, dict)
            and attestation.get("type") == PINNED_GRANT
            and attestation.get("digest") != digest
        ):
            raise Unverified(f"{urn}: the entry's pinned-grant digest is not its card's")


def _check_status(
    place: dict[str, Any] | None,
    origin: str,
    keys: dict[str, dict[str, Any]],
    fetcher: Fetcher,
    urn: str,
) -> None:
    if place is None:
        raise Unverified(f"{urn}: its card names no revocation status list")
    url, index = place.get("statusListCredential"), place.get("statusListIndex")
    if _origin_or_none(url) != origin:
        raise Unverified(f"{urn}: its status list is not on its card's origin")
    if not isinstance(index, str) or not index.isdigit():
        raise Unverified(f"{urn}: its card's statusListIndex is not a number")
    status = fetcher.json(url, "status list", STATUS_LIST_BYTES)
    _check_list_signature(status, keys, url)
    _check_validity(status, url)
    bits = _bits(status, url)
    position = int(index)
    if position >= len(bits) * 8:
        raise Unverified(f"{urn}: its status index is past the end of {url}")
    if bits[position // 8] & (0x80 >> (position % 8)):
        raise Unverified(f"{urn}: revoked (its bit is set in {url})")


def _check_list_signature(
    status: dict[str, Any], keys: dict[str, dict[str, Any]], url: str
) -> None:
    # Only keys for the algorithms cards are signed with: a list "signed" with a key of
    # another kind (a shared secret) proves nothing.
    usable = {kid: jwk for kid, jwk in keys.items() if jwk.get("alg") in ALGORITHMS}
    try:
        verify_document(status, usable)
    except (BadSignature, ValueError, TypeError):
        raise Unverified(f"{url}: no signature by a key of its origin's JWKS verifies") from None


def _instant(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def _check_validity(status: dict[str, Any], url: str) -> None:
    """A list outside its validity period proves nothing: a cache or mirror could be keeping a
    revocation from view (VX-TRUST-8)."""
    valid_from, valid_until = _instant(status.get("validFrom")), _instant(status.get("validUntil"))
    if valid_from is None or valid_until is None:
        raise Unverified(f"{url} states no validity period")
    now = datetime.now(UTC)
    if not valid_from <= now < valid_until:
        raise Unverified(f"{url} is valid from {valid_from} until {valid_until}, not now")


def _bits(status: dict[str, Any], url: str) -> bytes:
    subject = status.get("credentialSubject")
    encoded = subject.get("encodedList") if isinstance(subject, dict) else None
    if not isinstance(encoded, str) or not encoded.startswith("u"):
        raise Unverified(f"{url} has no multibase encodedList")
    try:
        text = encoded[1:]
        compressed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        # GZIP only (wbits 16 + 15), stopping at the bound rather than inflating a bomb.
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        bits = inflater.decompress(compressed, STATUS_BITS_BYTES)
    except (binascii.Error, ValueError, zlib.error):
        raise Unverified(f"{url}: its encodedList is not base64url GZIP") from None
    if inflater.unconsumed_tail:
        raise Unverified(f"{url}: its list is longer than {STATUS_BITS_BYTES} bytes")
    return bits
