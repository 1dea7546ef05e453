"""Page tokens: opaque to clients, signed so that a changed one is refused (decision 220).

A token holds where the last page ended (the sort key of its last row and the persona key)
and a digest of the query it belongs to, signed with the installation's SECRET_KEY through
Django's signing. A token altered, forged, or replayed with another query is a 400.
"""

import hashlib
import json
from typing import Any

from django.core import signing

SALT = "virgo.ard.page-token"
MAX_TOKEN_LENGTH = 1024


class BadToken(Exception):
    """The token was not made by this installation for this query."""


def query_digest(query: dict[str, Any]) -> str:
    canonical = json.dumps(query, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def make_token(query: dict[str, Any], after: list[Any]) -> str:
    return signing.dumps({"q": query_digest(query), "after": after}, salt=SALT, compress=True)


def read_token(token: str, query: dict[str, Any]) -> list[Any]:
    """Where the page before this one ended, or BadToken."""
    try:
        payload = signing.loads(token, salt=SALT)
    except (signing.BadSignature, ValueError, UnicodeError):
        raise BadToken("was not issued by this registry") from None
    if not isinstance(payload, dict) or payload.get("q") != query_digest(query):
        raise BadToken("belongs to another query")
    after = payload.get("after")
    if not isinstance(after, list) or len(after) != 2 or not isinstance(after[1], int):
        raise BadToken("was not issued by this registry")
    return after
