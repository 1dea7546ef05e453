"""The secrets boundary's name and fake credentials for its tests (VX-SEC-14).

Fake credentials are assembled at run time from a seeded generator, so no scanner reading the
tests finds a token in them, and no test depends on a real one.
"""

import hashlib

BOUNDARY = "secret-credential-values"
BASE62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
BASE64 = BASE62 + "+/"
HEX = "0123456789abcdef"


def fake(label: str, length: int, alphabet: str = BASE62) -> str:
    """`length` characters that look random, the same on every run for the same label."""
    out, counter = [], 0
    while len(out) < length:
        block = hashlib.sha256(f"{label}:{counter}".encode()).digest()
        out.extend(alphabet[byte % len(alphabet)] for byte in block)
        counter += 1
    return "".join(out[:length])


AWS_SECRET = fake("aws-secret", 40, BASE64)
