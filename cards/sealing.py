"""Secrets sealed at rest in the database: signing keys (VX-SCALE-1) and the credentials Virgo
presents to the registries it federates with (VX-DISC-5).

A secret is stored as `v1:<kek fingerprint>:<nonce>:<ciphertext>`: its bytes (a key's PKCS#8
DER) encrypted with AES-256-GCM under the first key-encryption key of the settings
(VIRGO_KEY_ENCRYPTION_KEYS, virgo.kek), a random 96-bit nonce, and what the secret is for and
whose it is as associated data, so a sealed secret copied onto another row, or another kind of
row, does not open. Any configured KEK opens (the fingerprint says which); `virgo keys rewrap`
seals the keys again under the first.

Nothing here puts a secret's bytes or a KEK in a message: errors name the owner and fingerprints.
"""

import base64
import binascii
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

from virgo import kek

VERSION = "v1"
NONCE_BYTES = 12


class KeyCannotBeOpened(Exception):
    """A sealed secret this process cannot open; the message says why (no secret bytes)."""


@dataclass(frozen=True, slots=True)
class Purpose:
    """What a sealed secret is for: bound into its associated data, and named in errors."""

    associated: bytes
    noun: str


SIGNING_KEY = Purpose(b"virgo card signing key\x00", "signing key")
PEER_CREDENTIAL = Purpose(b"virgo federation peer credential\x00", "the credential for peer")


def _keks() -> list[bytes]:
    return [kek.decode(text) for text in settings.VIRGO_KEY_ENCRYPTION_KEYS]


def _aad(kid: str, purpose: Purpose) -> bytes:
    return purpose.associated + kid.encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def current_fingerprint() -> str:
    keks = _keks()
    if not keks:
        raise KeyCannotBeOpened(
            "no key-encryption key is configured (VIRGO_KEY_ENCRYPTION_KEY): nothing can be sealed"
        )
    return kek.fingerprint(keks[0])


def configured_fingerprints() -> list[str]:
    return [kek.fingerprint(each) for each in _keks()]


def seal(kid: str, secret: bytes, purpose: Purpose = SIGNING_KEY) -> str:
    """`secret` sealed under the current KEK, for `kid` (a key's kid, a peer's URL)."""
    keks = _keks()
    if not keks:
        current_fingerprint()  # raises, naming the setting
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(keks[0]).encrypt(nonce, secret, _aad(kid, purpose))
    return ":".join((VERSION, kek.fingerprint(keks[0]), _b64(nonce), _b64(sealed)))


def sealed_under(sealed: str) -> str:
    """The fingerprint of the KEK that sealed `sealed` ('' when it is not a sealed key)."""
    parts = sealed.split(":")
    return parts[1] if len(parts) == 4 and parts[0] == VERSION else ""


def unseal(kid: str, sealed: str, purpose: Purpose = SIGNING_KEY) -> bytes:
    """The secret sealed for `kid`, opened with whichever configured KEK sealed it."""
    owner = f"{purpose.noun} {kid}"
    parts = sealed.split(":")
    if len(parts) != 4 or parts[0] != VERSION:
        raise KeyCannotBeOpened(f"{owner}: its sealed secret is not in a known form")
    fingerprint = parts[1]
    for candidate in _keks():
        if kek.fingerprint(candidate) == fingerprint:
            break
    else:
        have = ", ".join(configured_fingerprints()) or "none"
        raise KeyCannotBeOpened(
            f"{owner} is sealed under key-encryption key {fingerprint}, which this "
            f"process is not given (it has {have}); set VIRGO_KEY_ENCRYPTION_KEY to the "
            "deployment's key-encryption keys"
        )
    try:
        return AESGCM(candidate).decrypt(_unb64(parts[2]), _unb64(parts[3]), _aad(kid, purpose))
    except (InvalidTag, binascii.Error, ValueError):
        raise KeyCannotBeOpened(
            f"{owner}: its sealed secret does not open with key-encryption key "
            f"{fingerprint} (altered, or sealed for another)"
        ) from None
