"""Signing keys sealed at rest in the database (VX-SCALE-1).

A private key is stored as `v1:<kek fingerprint>:<nonce>:<ciphertext>`: its PKCS#8 DER bytes
encrypted with AES-256-GCM under the first key-encryption key of the settings
(VIRGO_KEY_ENCRYPTION_KEYS, virgo.kek), a random 96-bit nonce, and the key's kid as associated
data, so a sealed key copied onto another key's row does not open. Any configured KEK opens
(the fingerprint says which); `virgo keys rewrap` seals again under the first.

Nothing here puts a key's bytes or a KEK in a message: errors name the kid and fingerprints.
"""

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

from virgo import kek

VERSION = "v1"
NONCE_BYTES = 12


class KeyCannotBeOpened(Exception):
    """A sealed signing key this process cannot open; the message says why (no key bytes)."""


def _keks() -> list[bytes]:
    return [kek.decode(text) for text in settings.VIRGO_KEY_ENCRYPTION_KEYS]


def _aad(kid: str) -> bytes:
    return b"virgo card signing key\x00" + kid.encode()


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


def seal(kid: str, secret: bytes) -> str:
    """`secret` sealed under the current KEK, for the key `kid`."""
    keks = _keks()
    if not keks:
        current_fingerprint()  # raises, naming the setting
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(keks[0]).encrypt(nonce, secret, _aad(kid))
    return ":".join((VERSION, kek.fingerprint(keks[0]), _b64(nonce), _b64(sealed)))


def sealed_under(sealed: str) -> str:
    """The fingerprint of the KEK that sealed `sealed` ('' when it is not a sealed key)."""
    parts = sealed.split(":")
    return parts[1] if len(parts) == 4 and parts[0] == VERSION else ""


def unseal(kid: str, sealed: str) -> bytes:
    """The secret sealed for `kid`, opened with whichever configured KEK sealed it."""
    parts = sealed.split(":")
    if len(parts) != 4 or parts[0] != VERSION:
        raise KeyCannotBeOpened(f"signing key {kid}: its sealed private key is not in a known form")
    fingerprint = parts[1]
    for candidate in _keks():
        if kek.fingerprint(candidate) == fingerprint:
            break
    else:
        have = ", ".join(configured_fingerprints()) or "none"
        raise KeyCannotBeOpened(
            f"signing key {kid} is sealed under key-encryption key {fingerprint}, which this "
            f"process is not given (it has {have}); set VIRGO_KEY_ENCRYPTION_KEY to the "
            "deployment's key-encryption keys"
        )
    try:
        return AESGCM(candidate).decrypt(_unb64(parts[2]), _unb64(parts[3]), _aad(kid))
    except (InvalidTag, binascii.Error, ValueError):
        raise KeyCannotBeOpened(
            f"signing key {kid}: its sealed private key does not open with key-encryption key "
            f"{fingerprint} (altered, or sealed for another key)"
        ) from None
