"""A persona's change token: a random value replaced whenever anything its public card or its
stamp depends on changes (a new generation, a stamp's outcome, standing, a revocation, a
quarantine, discoverability, deletion).

Every process that keeps something of a persona in memory keeps it under the token it read
before its database read, and uses it only while the token it reads now is the same: the public
card's fast path (cards.fastpath, which also moves the tokens) and the runtime's active stamps
(runtime.stamp). With Redis the token is a key of the rate-limit cache; without it (the embedded
default) a file under VIRGO_HOME that every process of the machine reads.
"""

import enum
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import caches

from virgo.outages import REDIS_ERRORS, SHARED_CACHE

KEY_PREFIX = "virgo:card-token:"
# Where the embedded default keeps the tokens, under VIRGO_HOME; a token is 16 hex digits.
TOKEN_DIRECTORY = "card-tokens"
TOKEN_BYTES = 16


class Token(enum.Enum):
    # The shared cache could not be read: a token that no token read from it ever equals.
    UNREAD = "unread"


def kept_seconds() -> int:
    """How long a process keeps what it read under a token, should a token's move be lost."""
    return settings.VIRGO_CARD_PROCESS_CACHE_SECONDS


def token_directory() -> Path:
    return Path(settings.VIRGO_HOME) / TOKEN_DIRECTORY


def redis_client(cache: Any) -> Any:
    """django-redis's raw client; None for any other backend."""
    client = getattr(cache, "client", None)
    get_client = getattr(client, "get_client", None)
    return get_client(write=True) if get_client is not None else None


def read_file(directory: Path, persona: str) -> str | Token | None:
    """The persona's token file, None if none was ever written; unreadable, a token no entry
    was kept under (so what it stands for is read from the database)."""
    try:
        with open(directory / persona, "rb") as handle:
            return handle.read(TOKEN_BYTES).decode("ascii", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return secrets.token_hex(8)


def read(persona: str) -> str | Token | None:
    """The persona's token now: one GET on Redis, or one small file read."""
    cache = caches[settings.RATELIMIT_USE_CACHE]
    client = redis_client(cache)
    if client is None:
        return read_file(token_directory(), persona)
    if not SHARED_CACHE.should_try("persona_token"):
        return Token.UNREAD
    try:
        value = client.get(cache.make_key(KEY_PREFIX + persona))
    except REDIS_ERRORS as error:
        SHARED_CACHE.failed("persona_token", error)
        return Token.UNREAD
    SHARED_CACHE.succeeded()
    return value.decode() if value is not None else None
