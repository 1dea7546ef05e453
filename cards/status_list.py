"""The revocation status list (VX-TRUST-7), in the manner of W3C Bitstring Status List v1.0.

Each generation has an index (personas.models.StatusListEntry); its card names the list and
the index in a BitstringStatusListEntry (`status_extension`), covered by the card's signature.
The list is one document at a stable URL, a BitstringStatusListCredential-shaped JSON whose
`credentialSubject.encodedList` is the multibase base64url (no padding, prefix `u`) of the
GZIP-compressed bitstring, at least 131,072 bits, index 0 the left-most bit of the first byte.
A set bit means revoked. The document carries nothing but the bits: no persona, owner or
generation is named, so a peer fetching it once learns about all its cards and Virgo learns
nothing about which one it checks.

It is valid for a period (VX-TRUST-8): `validFrom` and `validUntil`, VIRGO_STATUS_LIST_VALIDITY
apart, so an old list a cache or a mirror keeps stops verifying for a peer that checks the dates
(the verifier in docs/revocation.md does), rather than hide a revocation forever. The period
starts at a multiple of half the validity, read from the clock, so every process renders the
same dates (and the same ETag) without asking one another, and the list is signed again each
half period.

It is secured as tombstones and cards are: `signatures`, one detached JWS (RFC 7515) per key of
the signing set over the RFC 8785 form of the rest (cards.signing.jws_for), verified against
Virgo's JWKS. Several signatures, not one compact VC-JWT, so that a peer holding an older JWKS
still verifies across a key rotation, as for cards.

Each web process keeps the list it last rendered, under the state it read before rendering
(personas.status_list.list_state: the version every revocation and signing-set change moves in
its own transaction, and the highest index, which sets the length). A request reads that state
(one query) and renders and signs again only when it moved; so a revocation's bit is served by
every process from its next request, whatever it held.
"""

import base64
import gzip
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from cards import keys
from cards.signing import jws_for, signers_marker
from personas.status_list import ListState, list_state, revoked_indexes
from virgo.canonical import canonical_bytes, sha256_hex

STATUS_LIST_ROUTE = ".well-known/status/revocation"
STATUS_EXTENSION = "https://virgo.dev/a2a/extensions/revocation-status/v1"
STATUS_PURPOSE = "revocation"
# The W3C minimum (16 KB uncompressed), so that a list with few entries still hides which
# index a peer cares about among many. The list grows by whole blocks of this size.
MIN_BITS = 131_072
_CONTEXT = "https://www.w3.org/ns/credentials/v2"


def status_list_url() -> str:
    return f"{settings.VIRGO_PUBLIC_BASE_URL}/{STATUS_LIST_ROUTE}"


def status_entry(index: int) -> dict[str, str]:
    """A BitstringStatusListEntry for this index (W3C: the index is a string of digits)."""
    url = status_list_url()
    return {
        "id": f"{url}#{index}",
        "type": "BitstringStatusListEntry",
        "statusPurpose": STATUS_PURPOSE,
        "statusListIndex": str(index),
        "statusListCredential": url,
    }


def status_extension(index: int) -> dict[str, Any]:
    """The card extension naming the generation's place in the revocation status list."""
    return {
        "uri": STATUS_EXTENSION,
        "description": (
            "Where to check whether this card is revoked: fetch statusListCredential (a W3C "
            "Bitstring Status List, signed by the keys of this installation's JWKS) and read "
            "the bit at statusListIndex; set means revoked, and the card's URL answers a "
            "tombstone. One fetch answers for every card of this installation."
        ),
        "required": False,
        "params": status_entry(index),
    }


def list_length(highest_index: int) -> int:
    """Bits enough for every index given out, in whole blocks of MIN_BITS."""
    blocks = highest_index // MIN_BITS + 1
    return blocks * MIN_BITS


def encoded_list(revoked: list[int], length: int) -> str:
    """Multibase base64url (no padding) of the GZIP of the bitstring. GZIP with no timestamp,
    so every process encodes the same bits to the same bytes."""
    bits = bytearray(length // 8)
    for index in revoked:
        bits[index // 8] |= 0x80 >> (index % 8)
    compressed = gzip.compress(bytes(bits), mtime=0)
    return "u" + base64.urlsafe_b64encode(compressed).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Validity:
    valid_from: datetime
    valid_until: datetime


def validity_at(now: float) -> Validity:
    """The validity period of the list signed at `now` (seconds since the epoch): from the
    last multiple of half the validity, for the whole validity."""
    validity = settings.VIRGO_STATUS_LIST_VALIDITY
    step = max(1, validity // 2)
    start = int(now) // step * step
    return Validity(
        valid_from=datetime.fromtimestamp(start, UTC),
        valid_until=datetime.fromtimestamp(start + validity, UTC),
    )


def _timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def list_document(revoked: list[int], highest_index: int, validity: Validity) -> dict[str, Any]:
    """The unsigned BitstringStatusListCredential: the issuer is this installation."""
    url = status_list_url()
    return {
        "@context": [_CONTEXT],
        "id": url,
        "type": ["VerifiableCredential", "BitstringStatusListCredential"],
        "issuer": settings.VIRGO_PUBLIC_BASE_URL + "/",
        "validFrom": _timestamp(validity.valid_from),
        "validUntil": _timestamp(validity.valid_until),
        "credentialSubject": {
            "id": f"{url}#list",
            "type": "BitstringStatusList",
            "statusPurpose": STATUS_PURPOSE,
            "encodedList": encoded_list(revoked, list_length(highest_index)),
        },
    }


@dataclass(frozen=True, slots=True)
class SignedList:
    state: ListState
    validity: Validity
    body: bytes
    # From the signed content and the signing set, not the signature bytes (ES256 signs with a
    # fresh nonce), so every process gives the same list the same ETag.
    etag: str


_held: SignedList | None = None
_rendering = threading.Lock()


def current_list() -> SignedList:
    """The signed list as the database says it is now: this process's own when the state it
    read and the validity period it is in are those that list was rendered under, else rendered
    and signed afresh."""
    global _held
    state = list_state()
    validity = validity_at(time.time())
    held = _held
    if held is not None and (held.state, held.validity) == (state, validity):
        return held
    with _rendering:
        # Threads that read the same moved state render it once.
        held = _held
        if held is None or (held.state, held.validity) != (state, validity):
            held = _held = _render(state, validity)
    return held


def _render(state: ListState, validity: Validity) -> SignedList:
    """Read after the state, so the list is never older than the version it is kept under."""
    document = list_document(revoked_indexes(), state.highest_index, validity)
    payload = canonical_bytes(document)
    signers = keys.signers()
    signed = {**document, "signatures": jws_for(payload, signers)}
    body = canonical_bytes(signed)
    etag = '"' + sha256_hex(payload + signers_marker(signers).encode())[:32] + '"'
    return SignedList(state, validity, body, etag)


def _forget(**kwargs: Any) -> None:
    """A changed setting (the public base URL, in tests) renders the list again."""
    global _held
    _held = None


setting_changed.connect(_forget)
