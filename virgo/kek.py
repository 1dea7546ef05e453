"""Key-encryption keys (KEKs): what card signing keys are sealed under in the database (VX-SCALE-1).

A KEK is 32 random bytes written as URL-safe base64 (`python -m virgo.kek` prints a new one).
Settings read them from VIRGO_KEY_ENCRYPTION_KEY, or from the owner-private file
VIRGO_KEY_ENCRYPTION_KEY_FILE names: one or more, separated by commas or lines; the first
seals, every one opens, so a rotation is `new,old`, then `virgo keys rewrap`, then `new`.

A KEK is never printed, logged or put in an error: errors say which of the keys (by position)
is wrong, and a KEK is named elsewhere only by its fingerprint, a hash that reveals nothing of it.
"""

import base64
import binascii
import hashlib
import re
import secrets

from django.core.exceptions import ImproperlyConfigured

KEK_BYTES = 32
_SEPARATORS = re.compile(r"[\s,]+")


def generate() -> str:
    """A new KEK, as its settings take it."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEK_BYTES)).decode()


def decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode())


def fingerprint(kek: bytes) -> str:
    """What names a KEK where it must be named (a sealed key says which KEK sealed it)."""
    return hashlib.sha256(b"virgo key-encryption key\x00" + kek).hexdigest()[:16]


def development_kek(secret_key: str) -> str:
    """The local mode's KEK when none is configured: derived from SECRET_KEY, never for a
    deployment (production settings refuse to start without a KEK of their own)."""
    digest = hashlib.sha256(b"virgo development key-encryption key\x00" + secret_key.encode())
    return base64.urlsafe_b64encode(digest.digest()).decode()


def parse(text: str, *, variable: str) -> list[str]:
    """The KEKs `text` lists, first the one that seals; an error naming `variable` and which
    key (by position, never by value) is not a KEK."""
    found = [part for part in _SEPARATORS.split(text.strip()) if part]
    for position, part in enumerate(found, start=1):
        try:
            ok = len(base64.urlsafe_b64decode(part.encode())) == KEK_BYTES
        except (binascii.Error, ValueError):
            ok = False
        if not ok:
            raise ImproperlyConfigured(
                f"{variable}: key {position} of {len(found)} is not {KEK_BYTES} bytes of URL-safe "
                "base64; make one with `python -m virgo.kek`"
            )
    unique = list(dict.fromkeys(found))
    if not unique:
        raise ImproperlyConfigured(f"{variable}: holds no key; make one with `python -m virgo.kek`")
    return unique


if __name__ == "__main__":
    print(generate())
