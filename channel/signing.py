"""HMAC signatures of the hub's decision callbacks (header `X-Virgo-Signature`).

The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + raw body>` keyed with
VIRGO_CHANNEL_SECRET. The timestamp is signed with the body, so an old answer cannot be replayed
outside the tolerance window, and the body cannot be changed without the secret.
"""

import hashlib
import hmac
import time

HEADER = "X-Virgo-Signature"


class BadSignature(Exception):
    """The callback is not signed by the hub: missing, malformed, stale or wrong."""


def signature(*, secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def sign(*, secret: str, body: bytes, now: float | None = None) -> str:
    return signature(
        secret=secret, body=body, timestamp=int(now if now is not None else time.time())
    )


def verify(
    *, secret: str, body: bytes, header: str, tolerance: int, now: float | None = None
) -> None:
    """Raise BadSignature unless `header` signs `body` with `secret` within `tolerance` seconds."""
    if not secret:
        raise BadSignature("no callback secret is configured")
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    timestamp, given = parts.get("t", ""), parts.get("v1", "")
    # ASCII digits only: str.isdigit() also accepts digits such as '²' that int() refuses.
    if not (timestamp.isascii() and timestamp.isdigit()) or not given:
        raise BadSignature("signature header is malformed")
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise BadSignature("signature timestamp is outside the tolerance window")
    expected = signature(secret=secret, body=body, timestamp=int(timestamp))
    if not hmac.compare_digest(expected, f"t={timestamp},v1={given}"):
        raise BadSignature("signature does not match")
