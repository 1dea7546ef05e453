"""HMAC signatures of the hub's decision callbacks (header `X-Virgo-Signature`).

The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + raw body>` keyed with
VIRGO_CHANNEL_SECRET. The timestamp is signed with the body, so an old answer cannot be replayed
outside the tolerance window, and the body cannot be changed without the secret. Inside the
window a signed callback is accepted once (channel.callbacks records each accepted signature).

The header is read within bounds before anything is computed from it: at most MAX_HEADER_CHARS,
exactly the two parts `t` (1 to 12 ASCII digits) and `v1` (64 lowercase hex digits), each once.
Anything else is a BadSignature, never an exception of the parser (int() of 5,000 digits raises).
"""

import hashlib
import hmac
import re
import time
from dataclasses import dataclass

HEADER = "X-Virgo-Signature"
# "t=" + 12 digits + ",v1=" + 64 hex digits is 82 characters; a little room, nothing more.
MAX_HEADER_CHARS = 128
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


class BadSignature(Exception):
    """The callback is not signed by the hub: missing, malformed, stale or wrong."""


@dataclass(frozen=True)
class Signed:
    """A verified signature: when it was signed, and the HMAC that names this callback."""

    timestamp: int
    digest: str


def signature(*, secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def sign(*, secret: str, body: bytes, now: float | None = None) -> str:
    return signature(
        secret=secret, body=body, timestamp=int(now if now is not None else time.time())
    )


def _parts(header: str) -> tuple[str, str]:
    if len(header) > MAX_HEADER_CHARS:
        raise BadSignature("signature header is malformed")
    parts: dict[str, str] = {}
    for part in header.split(","):
        name, separator, value = part.partition("=")
        if not separator or name not in ("t", "v1") or name in parts:
            raise BadSignature("signature header is malformed")
        parts[name] = value
    timestamp, given = parts.get("t", ""), parts.get("v1", "")
    # fullmatch on explicit ASCII classes: str.isdigit() also accepts digits such as '²' that
    # int() refuses.
    if not _TIMESTAMP.fullmatch(timestamp) or not _DIGEST.fullmatch(given):
        raise BadSignature("signature header is malformed")
    return timestamp, given


def verify(
    *, secret: str, body: bytes, header: str, tolerance: int, now: float | None = None
) -> Signed:
    """The signature `header` gives `body` with `secret` within `tolerance` seconds; raise
    BadSignature unless there is one."""
    if not secret:
        raise BadSignature("no callback secret is configured")
    timestamp, given = _parts(header)
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise BadSignature("signature timestamp is outside the tolerance window")
    expected = signature(secret=secret, body=body, timestamp=int(timestamp))
    if not hmac.compare_digest(expected, f"t={timestamp},v1={given}"):
        raise BadSignature("signature does not match")
    return Signed(timestamp=int(timestamp), digest=given)
