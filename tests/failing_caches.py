"""Cache backends that fail the way a shared cache can, for the tests of what depends on it.

Named in CACHES by their dotted path, e.g. `{"BACKEND": "tests.failing_caches.UnreachableCache"}`;
`went_without` reads how often a use of the cache went without it (virgo_unavailable_total).
"""

from typing import Any

import redis.exceptions
from django.core.cache.backends.locmem import LocMemCache
from prometheus_client import REGISTRY

_OPERATIONS = (
    "add",
    "get",
    "set",
    "touch",
    "delete",
    "get_many",
    "set_many",
    "delete_many",
    "incr",
    "decr",
    "has_key",
    "clear",
)


class _Raising(LocMemCache):
    def error(self) -> Exception:
        raise NotImplementedError

    def __getattribute__(self, name: str) -> Any:
        if name in _OPERATIONS:
            raise object.__getattribute__(self, "error")()
        return super().__getattribute__(name)


class UnreachableCache(_Raising):
    """Every call fails as django-redis's does when nothing listens at Redis's address."""

    def error(self) -> Exception:
        return redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:1. Refused.")


class RefusedCache(_Raising):
    """Every call fails with the operating system's error, as a memcached client's does."""

    def error(self) -> Exception:
        return ConnectionRefusedError(111, "Connection refused")


class ForgetfulCache(LocMemCache):
    """Every call 'succeeds' and keeps nothing, as django-redis does with IGNORE_EXCEPTIONS set
    while Redis is down: add() is False, get() its default or None, incr() None."""

    def add(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return None

    def get_many(self, keys: Any, version: Any = None) -> dict[str, Any]:
        return {}

    def set(self, *args: Any, **kwargs: Any) -> None:
        return None

    def incr(self, *args: Any, **kwargs: Any) -> Any:
        return None


def went_without(use: str) -> float:
    return (
        REGISTRY.get_sample_value("virgo_unavailable_total", {"service": "cache", "use": use})
        or 0.0
    )
